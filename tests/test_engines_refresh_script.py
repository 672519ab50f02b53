"""scripts/refresh_engine_data.py's extractors on a tiny synthetic wheel (no download, no engine import)."""

from __future__ import annotations

import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from engine_flags import vllm_flags  # noqa: E402
from engine_source import Facts, ProbeError, Wheel  # noqa: E402
from facts_sglang import _sglang_page_size_resolution  # noqa: E402
from facts_vllm import _vllm_pd_tp  # noqa: E402

FILES = {
    "vllm/config/cache.py": '''
        from typing import Literal
        CacheDType = Literal["auto", "fp8", "fp8_e5m2"]
    ''',
    "vllm/config/parallel.py": '''
        from dataclasses import field
        from vllm.config.cache import CacheDType
        class ParallelConfig:
            tensor_parallel_size: int = 1
            enable_expert_parallel: bool = False
            distributed_executor_backend: Literal["ray", "mp"] | None = None
            kv_cache_dtype: CacheDType = "auto"
            ranks: list[int] = field(default_factory=list)
    ''',
    "vllm/engine/arg_utils.py": '''
        from vllm.config.parallel import ParallelConfig
        class EngineArgs:
            max_num_seqs: int = 256
            @staticmethod
            def add_cli_args(parser):
                parallel_kwargs = get_kwargs(ParallelConfig)
                group = parser.add_argument_group("parallel")
                group.add_argument("--tensor-parallel-size", "-tp", **parallel_kwargs["tensor_parallel_size"])
                group.add_argument("--enable-expert-parallel", **parallel_kwargs["enable_expert_parallel"])
                group.add_argument("--distributed-executor-backend",
                                   **parallel_kwargs["distributed_executor_backend"])
                group.add_argument("--kv-cache-dtype", **parallel_kwargs["kv_cache_dtype"])
                group.add_argument("--max-num-seqs", type=int, default=EngineArgs.max_num_seqs)
                return parser
    ''',
    "vllm/entrypoints/openai/cli_args.py": '''
        class FrontendArgs:
            host: str | None = None
            port: int = 8000
        def make_arg_parser(parser):
            parser.add_argument("--headless", action="store_true", default=False)
            return parser
    ''',
    "vllm/distributed/kv_transfer/kv_connector/utils.py": '''
        class TpKVTopology:
            def tp_ratio(self, remote_tp_size):
                assert self.tp_size % remote_tp_size == 0, ("not divisible")
                return self.tp_size // remote_tp_size
    ''',
}


def _synthetic_wheel(tmp_path, package: str, files: dict[str, str]) -> Wheel:
    """A wheel of ``files`` (dedented sources) named as release 9.9.9 of ``package``."""
    path = tmp_path / f"{package}-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, textwrap.dedent(text).lstrip("\n"))
    return Wheel(path)


@pytest.fixture
def wheel(tmp_path) -> Wheel:
    return _synthetic_wheel(tmp_path, "vllm", FILES)


def test_flags_take_type_default_and_choices_from_the_config_field(wheel):
    flags = {f["name"]: f for f in vllm_flags(wheel)}
    assert flags["--tensor-parallel-size"]["aliases"] == ["-tp"]
    assert flags["--tensor-parallel-size"]["default"] == 1
    assert flags["--enable-expert-parallel"]["boolean_optional"] is True
    assert flags["--distributed-executor-backend"]["choices"] == ["ray", "mp"]
    # the Literal alias is resolved through the config module's import
    assert flags["--kv-cache-dtype"]["choices"] == ["auto", "fp8", "fp8_e5m2"]
    # default=EngineArgs.max_num_seqs is read from the class
    assert flags["--max-num-seqs"]["default"] == 256 and flags["--max-num-seqs"]["type"] == "int"
    assert flags["--tensor-parallel-size"]["source"] == {"file": "vllm/engine/arg_utils.py", "line": 8}
    assert {"--host", "--port", "--headless"} <= set(flags)


def test_the_tp_probe_reads_the_assertion(wheel):
    facts = Facts(wheel)
    _vllm_pd_tp(wheel, facts)
    fact = facts.items["pd_tp_rule"]
    assert fact["value"] == "decode_multiple_of_prefill"
    assert fact["source"] == {"file": "vllm/distributed/kv_transfer/kv_connector/utils.py", "line": 3}


def test_a_probe_that_finds_nothing_fails_loudly(tmp_path):
    path = tmp_path / "vllm-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("vllm/distributed/kv_transfer/kv_connector/utils.py", "x = 1\n")
    with pytest.raises(ProbeError, match="no tp_ratio divisibility assertion"):
        _vllm_pd_tp(Wheel(path), Facts(Wheel(path)))


ROUTER_FILES = {
    "vllm_router/router_args.py": '''
        class RouterArgs:
            host: str = "0.0.0.0"
            @staticmethod
            def add_cli_args(parser, use_router_prefix=False):
                prefix = "router-" if use_router_prefix else ""
                parser.add_argument("--host", type=str, default=RouterArgs.host)
                parser.add_argument(f"--{prefix}policy", type=str, choices=["random", "round_robin"])
                _discovery(parser)
        def _discovery(parser):
            parser.add_argument("--service-discovery", action="store_true")
    ''',
    "vllm_router/launch_router.py": '''
        def parse(args):
            RouterArgs.add_cli_args(parser, use_router_prefix=False)
    ''',
}


def test_router_flags_resolve_the_prefix_and_follow_helpers(tmp_path):
    from tool_flags import router_flags

    path = tmp_path / "vllm_router-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in ROUTER_FILES.items():
            archive.writestr(name, textwrap.dedent(text).lstrip("\n"))
    program, flags = router_flags(Wheel(path), "vllm-router")
    by_name = {f["name"]: f for f in flags}
    assert program == ["vllm-router"] and sorted(by_name) == ["--host", "--policy", "--service-discovery"]
    assert by_name["--policy"]["choices"] == ["random", "round_robin"]
    assert by_name["--host"]["default"] == "0.0.0.0" and by_name["--host"]["source"]["line"] == 6
    assert by_name["--service-discovery"]["source"]["line"] == 10


SGLANG_053_FILES = {
    "sglang/srt/server_args.py": '''
        class ServerArgs:
            def _handle_model_specific_adjustments(self):
                if model_arch in ["GptOssForCausalLM"]:
                    if self.attention_backend is None:
                        if is_cuda() and is_sm100_supported():
                            self.attention_backend = "trtllm_mha"
                if is_deepseek_nsa(hf_config):
                    if not is_npu():
                        self.page_size = 64
            def _handle_attention_backend_compatibility(self):
                if (
                    self.attention_backend == "trtllm_mla"
                ):
                    if self.page_size not in [32, 64]:
                        logger.warning("TensorRT-LLM MLA only supports page_size of 32 or 64")
                        self.page_size = 64
                if (
                    self.attention_backend == "trtllm_mha"
                ):
                    if self.page_size not in [16, 32, 64]:
                        self.page_size = 64
            def _handle_page_size(self):
                if self.page_size is None:
                    self.page_size = 1
    ''',
    "sglang/srt/model_executor/model_runner.py": '''
        def model_specific_adjustment(self):
            if server_args.attention_backend is None:
                if not self.use_mla_backend:
                    server_args.attention_backend = (
                        "flashinfer" if is_flashinfer_available() else "triton"
                    )
                else:
                    # MLA architecture
                    if is_hopper_with_cuda_12_3():
                        server_args.attention_backend = "fa3"
                    elif is_sm100_supported():
                        server_args.attention_backend = "flashinfer"
    ''',
    "sglang/srt/configs/model_config.py": '''
        def is_deepseek_nsa(config):
            return config.architectures[0] in ["DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"]
    ''',
}


def test_the_page_size_probe_reads_the_default_the_backend_constraints_and_the_overrides(tmp_path):
    wheel = _synthetic_wheel(tmp_path, "sglang", SGLANG_053_FILES)
    facts = Facts(wheel)
    _sglang_page_size_resolution(wheel, facts)
    items = facts.items
    assert items["page_size_default"]["value"] == 1
    assert items["page_size_default"]["source"] == {"file": "sglang/srt/server_args.py", "line": 24}
    assert items["page_size_trtllm_mla"]["value"] == {"accepts": [32, 64], "otherwise": 64}
    assert items["page_size_trtllm_mha"]["value"] == {"accepts": [16, 32, 64], "otherwise": 64}
    assert items["page_size_trtllm_mha"]["quote"] == "if self.page_size not in [16, 32, 64]:"
    assert items["sm100_attention_backend"]["value"] == {"gqa": "flashinfer", "mla": "flashinfer"}
    assert items["sm100_model_attention_backend"]["value"] == {"GptOssForCausalLM": "trtllm_mha"}
    assert items["page_size_dsa"]["value"] == {"page_size": 64, "rocm": 64,
                                               "architectures": ["DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"]}


def test_the_page_size_probe_fails_loudly_when_the_default_moved(tmp_path):
    files = dict(SGLANG_053_FILES)
    files["sglang/srt/server_args.py"] = files["sglang/srt/server_args.py"].replace("self.page_size = 1", "pass")
    wheel = _synthetic_wheel(tmp_path, "sglang", files)
    with pytest.raises(ProbeError, match="page_size"):
        _sglang_page_size_resolution(wheel, Facts(wheel))
