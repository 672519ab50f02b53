"""Every value that reaches a shell script, a YAML file or a command line passes through here.

Plan fields (``model``, ``pools[].gpu``, ``placement[].node``, instance ids) and emit options come
from files a user may not have written. Each is checked against a strict pattern before it is
used; tokens are then quoted with :func:`shlex.quote`. The only unquoted expansions in generated
scripts are the environment variables layoutopt itself names (:data:`SHELL_VARIABLES`).
"""

from __future__ import annotations

import re
import shlex

from layoutopt.errors import InputError

# HuggingFace repository ids: "org/name" or "name"; letters, digits, '.', '_', '-'.
_HF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
# Catalog GPU names such as H100-SXM, A100-80GB-SXM, GB200.
_GPU = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
# Host names (RFC 1123 labels joined by dots; Kubernetes node names are DNS subdomains).
_HOST = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# Instance ids end up in file names and Kubernetes names.
_INSTANCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
# Container image references: [registry[:port]/]path[:tag][@sha256:digest].
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._-]*(:[0-9]+)?(/[a-z0-9][a-z0-9._-]*)*(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?"
                    r"(@sha256:[a-f0-9]{64})?")
_SECRET_KEY = re.compile(r"[-._A-Za-z0-9]{1,253}")

# Environment variables the generated scripts and pod commands expand; nothing else is expanded.
SHELL_VARIABLES = ("NODE_RANK", "NODE_IP", "POD_IP", "LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX", "HF_TOKEN",
                   "ROUTER_HOST")
_EXPANSION = re.compile(r"\$\{(?:%s)(?::-[A-Za-z0-9._-]*)?\}|\$\(\((?:LWS_WORKER_INDEX|NODE_RANK) \* [0-9]+\)\)"
                        % "|".join(SHELL_VARIABLES))


def _check(pattern: re.Pattern[str], field: str, value: object, allowed: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InputError(field, value, allowed)
    return value


def model_id(value: object, field: str = "--model-id") -> str:
    return _check(_HF_ID, field, value, "a HuggingFace model id such as Qwen/Qwen3-32B (letters, digits, . _ - "
                  "and one /); for a model given as a config.json, pass --model-id with the id to serve")


def gpu_name(value: object, field: str = "pools[].gpu") -> str:
    return _check(_GPU, field, value, "a GPU name from the catalog (letters, digits, . _ + -)")


def host_name(value: object, field: str = "placement[].node") -> str:
    return _check(_HOST, field, value, "a host name (RFC 1123: letters, digits, '-' and dots)")


def instance_id(value: object, field: str = "placement[].instance_id") -> str:
    return _check(_INSTANCE_ID, field, value, "an id of letters, digits, . _ - (at most 63)")


def namespace(value: object, field: str = "--namespace") -> str:
    return _check(_DNS_LABEL, field, value, "a Kubernetes namespace (DNS-1123 label: a-z, 0-9, '-', at most 63)")


def image(value: object, field: str = "--image") -> str:
    return _check(_IMAGE, field, value, "a container image reference such as vllm/vllm-openai:v0.33.0")


def secret_name(value: object, field: str = "--hf-token-secret") -> str:
    return _check(_DNS_LABEL, field, value, "a Kubernetes Secret name (DNS-1123 label)")


def secret_key(value: object, field: str = "--hf-token-secret") -> str:
    return _check(_SECRET_KEY, field, value, "a Secret key (letters, digits, - . _)")


def port(value: object, field: str = "port") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= 65535:
        raise InputError(field, value, "a TCP port in 1024..65535")
    return value


def dns_name(text: str, limit: int = 63) -> str:
    """``text`` as a Kubernetes DNS-1123 label (also a safe file name)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:limit].rstrip("-") or "x"


def shell_word(token: str) -> str:
    """``token`` quoted for sh. A token that holds one of layoutopt's own variable expansions (and
    otherwise only safe characters) is double-quoted so that it expands; anything else is
    single-quoted by :func:`shlex.quote`, so no plan value can run a command."""
    if "$" in token:
        rest = _EXPANSION.sub("", token)
        if "$" not in rest and re.fullmatch(r"[A-Za-z0-9._:/=,@+-]*", rest):
            return f'"{token}"'
    return shlex.quote(token)
