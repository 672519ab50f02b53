"""Model catalog: ``ModelSpec``, HuggingFace ``config.json`` import and the built-in models."""

from layoutopt.model_catalog.catalog import get_model, list_models, model_from_config_file
from layoutopt.model_catalog.hf_import import SUPPORTED_MODEL_TYPES, spec_from_hf_config
from layoutopt.model_catalog.spec import BYTES_PER_VALUE, ModelSpec

__all__ = [
    "BYTES_PER_VALUE",
    "SUPPORTED_MODEL_TYPES",
    "ModelSpec",
    "get_model",
    "list_models",
    "model_from_config_file",
    "spec_from_hf_config",
]
