"""Hardware catalog: built-in rows against the reference, name resolution, user override files."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from layoutopt.errors import InputError
from layoutopt.hardware_catalog import (
    GpuPrice,
    default_node_type,
    get_gpu,
    get_node_type,
    list_gpus,
    list_node_types,
    load_catalog,
    load_prices,
    with_prices,
)

EXPECTED_GPUS = {
    "A100-80GB-SXM", "H100-SXM", "H100-PCIe", "H200-SXM", "B200", "B300", "GB200", "GB300",
    "L40S", "L4", "MI300X", "MI325X", "MI355X",
}


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# --- built-in rows -------------------------------------------------------------------------

def test_catalog_has_the_expected_gpus_each_with_sources_and_a_dated_price():
    gpus = list_gpus()
    assert {g.name for g in gpus} == EXPECTED_GPUS
    for gpu in gpus:
        assert "[" in gpu.source and len(gpu.source) > 40, gpu.name
        assert gpu.price is not None, gpu.name
        assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", gpu.price.as_of), gpu.name
        assert len(gpu.price.source) > 20, gpu.name


def test_prices_without_a_reliable_list_price_are_marked_estimates():
    for name in ("B300", "GB300", "MI355X"):
        assert "[estimate]" in get_gpu(name).price.source
    for name in EXPECTED_GPUS - {"B300", "GB300", "MI355X"}:
        assert "[estimate]" not in get_gpu(name).price.source


@pytest.mark.parametrize(
    ("name", "bf16_tflops", "fp8_tflops", "fp4_tflops", "bandwidth_gb_per_s", "scaleup_gb_per_s", "domain_gpus"),
    [
        ("H100-SXM", 989, 1979, None, 3350, 450, 8),
        ("A100-80GB-SXM", 312, None, None, 2039, 300, 8),
        ("H100-PCIe", 756.5, 1513, None, 2000, 0, 1),
        ("H200-SXM", 989, 1979, None, 4800, 450, 8),
        ("B200", 2250, 4500, 9000, 8000, 900, 8),
        ("GB200", 2500, 5000, 10000, 8000, 900, 72),
        ("GB300", 2500, 5000, 15000, 8000, 900, 72),
        ("L4", 121, 242, None, 300, 0, 1),
        ("MI300X", 1307.4, 2614.9, None, 5300, 448, 8),
    ],
)
def test_peaks_match_the_reference(
    name, bf16_tflops, fp8_tflops, fp4_tflops, bandwidth_gb_per_s, scaleup_gb_per_s, domain_gpus
):
    gpu = get_gpu(name)
    assert gpu.bf16_tflops == pytest.approx(bf16_tflops)
    assert gpu.fp8_tflops == (None if fp8_tflops is None else pytest.approx(fp8_tflops))
    assert gpu.fp4_tflops == (None if fp4_tflops is None else pytest.approx(fp4_tflops))
    assert gpu.memory_bandwidth_gb_per_s == pytest.approx(bandwidth_gb_per_s)
    assert gpu.scaleup_gb_per_s == scaleup_gb_per_s
    assert gpu.scaleup_domain_gpus == domain_gpus


def test_a100_has_no_fp8():
    a100 = get_gpu("A100")
    assert not a100.supports("fp8") and a100.peak_tflops("fp8") is None
    assert a100.supports("bf16")


@pytest.mark.parametrize(
    ("name", "memory_mib"),
    [("H100-SXM", 81_559), ("B300", 275_040), ("GB200", 189_471), ("GB300", 284_208)],
)
def test_memory_is_what_the_runtime_sees(name, memory_mib):
    assert get_gpu(name).memory_gib == pytest.approx(memory_mib / 1024, abs=0.01)


def test_prices_within_their_spread():
    for gpu in list_gpus():
        p = gpu.price
        assert 0 < p.low_usd_per_hour <= p.typical_usd_per_hour <= p.high_usd_per_hour, gpu.name
    assert get_gpu("H100").price.typical_usd_per_hour == pytest.approx(3.99)


# --- name resolution -----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("h100", "H100-SXM"), ("H100", "H100-SXM"), ("H100-SXM", "H100-SXM"), ("h100_sxm", "H100-SXM"),
        ("h100sxm", "H100-SXM"), ("H100 SXM5", "H100-SXM"), ("  h100-sxm  ", "H100-SXM"),
        ("h100 pcie", "H100-PCIe"), ("a100", "A100-80GB-SXM"), ("A100_80GB", "A100-80GB-SXM"),
        ("h200", "H200-SXM"), ("b200", "B200"), ("gb200-nvl72", "GB200"), ("l40s", "L40S"),
        ("l4", "L4"), ("mi300x", "MI300X"), ("AMD MI325X", "MI325X"), ("mi355x", "MI355X"),
    ],
)
def test_alias_resolution(alias, canonical):
    assert get_gpu(alias).name == canonical


def test_unknown_gpu_suggests_the_closest_name():
    with pytest.raises(InputError) as caught:
        get_gpu("H10")
    assert caught.value.field == "gpu"
    assert caught.value.hint.startswith("did you mean H100-SXM")
    assert "H100-SXM" in str(caught.value)


def test_unknown_node_type_suggests_the_closest_name():
    with pytest.raises(InputError, match="hgx-h100-8"):
        get_node_type("hgx-h10-8")


# --- node types ----------------------------------------------------------------------------

def test_exactly_one_default_node_type_per_gpu():
    nodes = list_node_types()
    for gpu in EXPECTED_GPUS:
        assert sum(n.default_for_gpu for n in nodes if n.gpu == gpu) == 1, gpu
    assert all(n.source for n in nodes)


def test_node_nic_bandwidth_per_gpu_matches_the_gpu_row():
    for node in list_node_types():
        assert node.nic_gbit_per_s_per_gpu == get_gpu(node.gpu).nic_gbit_per_s, node.name


@pytest.mark.parametrize(("gpu", "node_name", "gpus_per_node", "domain_gpus", "nodes_per_domain"), [
    ("H100", "hgx-h100-8", 8, 8, 1),
    ("GB200", "gb200-nvl72-tray", 4, 72, 18),
    ("GB300", "gb300-nvl72-tray", 4, 72, 18),
    ("L40S", "pcie-l40s-8", 8, 1, 1),
    ("MI355X", "mi355x-8", 8, 8, 1),
])
def test_default_node_shapes(gpu, node_name, gpus_per_node, domain_gpus, nodes_per_domain):
    node = default_node_type(gpu)
    assert (node.name, node.gpus_per_node, node.nvlink_domain_gpus) == (node_name, gpus_per_node, domain_gpus)
    assert node.nodes_per_nvlink_domain == nodes_per_domain
    assert get_node_type(node_name.upper()) == node


# --- user files ----------------------------------------------------------------------------

GPU_ROW = """\
gpus:
  - name: {name}
    vendor: nvidia
    bf16_tflops: {bf16}
    memory_gib: 40
    memory_bandwidth_gb_per_s: 1555
    scaleup_gb_per_s: 300
    scaleup_domain_gpus: 8
    pcie_gb_per_s: 32
    nic_gbit_per_s: 200
    tdp_w: 400
    source: test row
"""


def test_user_gpu_file_adds_and_replaces_rows(tmp_path):
    added = write(tmp_path, "add.yaml", GPU_ROW.format(name="A100-40GB", bf16=312))
    assert {g.name for g in list_gpus(added)} == EXPECTED_GPUS | {"A100-40GB"}
    assert get_gpu("a100_40gb", added).memory_gib == 40
    replaced = write(tmp_path, "replace.yaml", GPU_ROW.format(name="h100", bf16=900))
    h100 = get_gpu("H100 SXM5", replaced)  # built-in aliases still resolve to the replacement
    assert (h100.name, h100.bf16_tflops, h100.price) == ("H100-SXM", 900, None)
    assert len(list_gpus(replaced)) == len(EXPECTED_GPUS)
    assert get_gpu("H100").bf16_tflops == 989  # built-in cache untouched


def test_bad_user_gpu_row_names_file_row_and_field(tmp_path):
    bad = write(tmp_path, "bad.yaml", GPU_ROW.format(name="X1", bf16=-5))
    with pytest.raises(InputError) as caught:
        list_gpus(bad)
    message = str(caught.value)
    assert "bad.yaml" in message and "gpus[0] (X1).bf16_tflops" in message and "-5" in message
    unknown_field = write(tmp_path, "extra.yaml", GPU_ROW.format(name="X1", bf16=5) + "    colour: red\n")
    with pytest.raises(InputError, match=r"gpus\[0\] \(X1\)\.colour"):
        list_gpus(unknown_field)
    with pytest.raises(InputError, match="mapping with one key 'gpus:'"):
        list_gpus(write(tmp_path, "scalar.yaml", "42\n"))
    # the one wording of every YAML reader (layoutopt.io_safe): the input, the file, the line
    with pytest.raises(InputError, match=r"gpus file: got '.*broken\.yaml'; valid YAML \(line 2, column 1: "):
        list_gpus(write(tmp_path, "broken.yaml", "gpus: [\n"))


def test_user_gpu_alias_may_not_steal_a_builtin_name(tmp_path):
    row = GPU_ROW.format(name="X1", bf16=5).replace("    vendor:", "    aliases: [h100]\n    vendor:")
    with pytest.raises(InputError, match="already used by GPU H100-SXM"):
        list_gpus(write(tmp_path, "steal.yaml", row))


def test_user_node_file_moves_the_default_and_resolves_gpu_aliases(tmp_path):
    nodes = write(tmp_path, "nodes.yaml", """\
        node_types:
          - name: h100-pcie-bridged-box
            gpu: h100 pcie
            gpus_per_node: 8
            nvlink_domain_gpus: 2
            nics_per_node: 4
            nic_gbit_per_s: 400
            default_for_gpu: true
            source: our lab
        """)
    node = default_node_type("H100-PCIe", nodes)
    assert (node.name, node.gpu, node.nvlink_domain_gpus) == ("h100-pcie-bridged-box", "H100-PCIe", 2)
    assert not get_node_type("pcie-h100-8", nodes).default_for_gpu
    assert default_node_type("H100-PCIe").name == "pcie-h100-8"


def test_user_node_file_errors(tmp_path):
    two_defaults = write(tmp_path, "two.yaml", """\
        node_types:
          - {name: a, gpu: H100, gpus_per_node: 8, nvlink_domain_gpus: 8, nics_per_node: 8,
             nic_gbit_per_s: 400, default_for_gpu: true, source: s}
          - {name: b, gpu: H100-SXM, gpus_per_node: 8, nvlink_domain_gpus: 8, nics_per_node: 8,
             nic_gbit_per_s: 400, default_for_gpu: true, source: s}
        """)
    with pytest.raises(InputError, match="at most one default node type per GPU"):
        list_node_types(two_defaults)
    bad_domain = write(tmp_path, "domain.yaml", """\
        node_types:
          - {name: a, gpu: H100, gpus_per_node: 8, nvlink_domain_gpus: 3, nics_per_node: 8,
             nic_gbit_per_s: 400, source: s}
        """)
    with pytest.raises(InputError, match=r"node_types\[0\] \(a\): got .a.; nvlink_domain_gpus 3 and gpus_per_node 8"):
        list_node_types(bad_domain)
    unknown_gpu = write(tmp_path, "gpu.yaml", """\
        node_types:
          - {name: a, gpu: H10, gpus_per_node: 8, nvlink_domain_gpus: 8, nics_per_node: 8,
             nic_gbit_per_s: 400, source: s}
        """)
    with pytest.raises(InputError, match="did you mean H100-SXM"):
        list_node_types(unknown_gpu)


# --- prices --------------------------------------------------------------------------------

def test_price_override_file(tmp_path):
    prices_path = write(tmp_path, "prices.yaml", """\
        as_of: 2026-06-01
        source: ACME contract
        prices:
          H100: 2.10
          h200_sxm: {typical_usd_per_hour: 3.0, low_usd_per_hour: 2.5, high_usd_per_hour: 3.6, source: quote 7}
        """)
    prices = load_prices(prices_path)
    assert prices["H100-SXM"] == GpuPrice(
        typical_usd_per_hour=2.10, low_usd_per_hour=2.10, high_usd_per_hour=2.10,
        as_of="2026-06-01", source="ACME contract",
    )
    assert prices["H200-SXM"].source == "quote 7" and prices["H200-SXM"].high_usd_per_hour == 3.6
    priced = {g.name: g for g in with_prices(list_gpus(), prices)}
    assert priced["H100-SXM"].price.typical_usd_per_hour == 2.10
    assert priced["B200"].price == get_gpu("B200").price
    catalog = load_catalog(prices_path=prices_path)
    assert catalog.gpu("h200").price.typical_usd_per_hour == 3.0


@pytest.mark.parametrize(("body", "expected"), [
    ("prices: {H10: 2.0}\n", "did you mean H100-SXM"),
    ("prices: {H100: -1}\n", r"prices\.H100\.typical_usd_per_hour"),
    ("prices: {H100: {typical_usd_per_hour: 2.0, high_usd_per_hour: 1.0}}\n", "low <= typical <= high"),
    ("prices: {H100: cheap}\n", "a number"),
    ("prices: {H100: 2, h100_sxm: 3}\n", "already priced"),
    ("cost: {H100: 2}\n", "'prices:'"),
])
def test_bad_price_files(tmp_path, body, expected):
    path = write(tmp_path, "prices.yaml", body)
    with pytest.raises(InputError, match=expected) as caught:
        load_prices(path)
    assert "prices.yaml" in str(caught.value)


# --- purity --------------------------------------------------------------------------------

def test_import_reads_no_data_files():
    code = (
        "import layoutopt.hardware_catalog as hc\n"
        "from layoutopt.hardware_catalog.loaders import builtin_gpus, builtin_node_types\n"
        "assert builtin_gpus.cache_info().currsize == 0\n"
        "assert builtin_node_types.cache_info().currsize == 0\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
