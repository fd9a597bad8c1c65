#!/usr/bin/env python3
"""Tests of tools/audit/tinyfuse-audit on fixtures compiled here: a kernel that spills, one on the
tensor cores (mma.sync) and one without. Shows each rule passing and failing, and the exit codes.

Needs nvcc ($NVCC or PATH) and cuobjdump + nvdisasm (found as the tool finds them). Without them it
exits 77, which CTest reports as skipped, after saying what is missing.
Run: python3 tests/tools/test_audit.py   (or through ctest: audit_tool)
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "audit" / "tinyfuse-audit"
FIXTURES = Path(__file__).resolve().parent / "audit_fixtures"
ARCHS = ("80", "90")


def load_tool():
    loader = importlib.machinery.SourceFileLoader("tinyfuse_audit", str(TOOL))
    spec = importlib.util.spec_from_loader("tinyfuse_audit", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


audit = load_tool()


def find_nvcc():
    for c in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if c and Path(c).is_file():
            return c
    return None


class ParsingTest(unittest.TestCase):
    """The pieces that need no CUDA tools."""

    def test_opcode_strips_predicate_and_modifiers(self):
        self.assertEqual(audit.opcode_of("@!P0 HMMA.16816.F32 R8, R8, R6, RZ"), "HMMA")
        self.assertEqual(audit.opcode_of("BAR.SYNC.DEFER_BLOCKING 0x0"), "BAR")
        # HFMA2.MMA is an FMA issued on the MMA pipe, not a tensor-core instruction.
        self.assertEqual(audit.opcode_of("HFMA2.MMA R3, -RZ, RZ, 0, 0"), "HFMA2")

    def test_short_name(self):
        self.assertEqual(
            audit.short_name("void tinyfuse::cuda::pgemm::gemm_kernel<64, (bool)1>(tinyfuse::cuda::pgemm::Params)"),
            "pgemm::gemm_kernel<64, (bool)1>")
        self.assertEqual(audit.short_name("(anonymous namespace)::k(float*)"), "k")

    def test_parse_sass_counts_per_function_and_arch(self):
        text = "\n".join([
            "member /x/libt.a:CMakeFiles/t.dir/cuda/fused/a.cu.o:",
            "arch = sm_90",
            "\t\tFunction : _Z1kv",
            "        /*0000*/                   HGMMA.64x64x16.F32 R24, gdesc[UR4], RZ ;   /* 0x0 */",
            "        /*0010*/                   LDSM.16.M88.4 R4, [R2] ;   /* 0x0 */",
            "        /*0020*/              @!P1 STS [R3], R5 ;   /* 0x0 */",
            "        /*0030*/                   LDGSTS.E.128 [R1], [R2.64] ;   /* 0x0 */",
            "        /*0040*/                   HFMA2.MMA R3, -RZ, RZ, 0, 0 ;   /* 0x0 */",
        ])
        counts = audit.parse_sass(text, "libt.a")
        key = ("CMakeFiles/t.dir/cuda/fused/a.cu.o", "sm_90", "_Z1kv")
        self.assertIn(key, counts)
        c = counts[key]
        self.assertEqual((c["hgmma"], c["hmma"], c["ldsm"], c["sts"], c["ldgsts"], c["lds"]), (1, 0, 1, 1, 1, 0))


class FixtureAuditTest(unittest.TestCase):
    """The tool end to end on compiled fixtures."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="tinyfuse-audit-test-"))
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHS]
        for name in ("spill", "mma"):
            subprocess.run([NVCC, "-c", "-O3", *gencode, str(FIXTURES / f"{name}.cu"), "-o", str(cls.tmp / f"{name}.o")],
                           check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_audit(self, inputs, rules, *flags):
        rules_path = self.tmp / "rules.json"
        rules_path.write_text(json.dumps(rules))
        json_path = self.tmp / "audit.json"
        if json_path.exists():
            json_path.unlink()
        proc = subprocess.run([sys.executable, str(TOOL), "--rules", str(rules_path), "--json", str(json_path), *flags,
                               *[str(self.tmp / i) for i in inputs]], capture_output=True, text=True)
        doc = json.loads(json_path.read_text()) if json_path.exists() else None
        return proc, doc

    @staticmethod
    def rules(required=(), allowed=()):
        return {"max_local_bytes": 0, "max_stack_bytes": 0, "spill_allowed": list(allowed),
                "required_tensor_core_kernels": list(required)}

    def test_tensor_core_kernel_passes_and_is_counted(self):
        proc, doc = self.run_audit(["mma.o"], self.rules([{"pattern": "*fused::mma_kernel", "min_sm": 75}]))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        mma = [f for f in doc["functions"] if f["name"] == "fixture::fused::mma_kernel"]
        self.assertEqual(sorted(f["arch"] for f in mma), [f"sm_{a}" for a in ARCHS])
        for f in mma:
            self.assertGreaterEqual(f["hmma"], 1)
            self.assertEqual(f["hgmma"], 0)
            self.assertGreaterEqual(f["shared"], 128 * 4)  # the staged[] array (sm_90 adds a reserved 1 KiB)
            self.assertGreaterEqual(f["sts"], 1)
            self.assertGreaterEqual(f["lds"], 1)
            self.assertGreaterEqual(f["bar"], 1)
            self.assertEqual((f["local"], f["stack"], f["stl"], f["ldl"]), (0, 0, 0, 0))
            self.assertGreater(f["registers"], 0)
        self.assertIn("fixture::fused::mma_kernel", proc.stdout)
        self.assertIn("OK  tensor_core *fused::mma_kernel", proc.stdout)

    def test_spill_fails(self):
        proc, doc = self.run_audit(["spill.o", "mma.o"], self.rules())
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        fails = [r for r in doc["results"] if r["status"] == "fail"]
        self.assertEqual(len(fails), len(ARCHS))
        self.assertTrue(all(r["rule"] == "no_spills" and "spill_kernel" in r["message"] for r in fails))
        spill = [f for f in doc["functions"] if f["name"] == "spill_kernel"]
        self.assertTrue(all(f["stack"] + f["local"] >= 1024 and f["stl"] > 0 for f in spill))

    def test_spill_allowed_by_name_up_to_a_size(self):
        allow = {"pattern": "spill_kernel", "max_local_bytes": 0, "max_stack_bytes": 1024, "why": "fixture"}
        proc, _ = self.run_audit(["spill.o"], self.rules(allowed=[allow]))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # The allowance is a ceiling: more than it allows fails again.
        proc, _ = self.run_audit(["spill.o"], self.rules(allowed=[dict(allow, max_stack_bytes=1020)]))
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)

    def test_kernel_without_tensor_cores_fails(self):
        proc, doc = self.run_audit(["mma.o"], self.rules([{"pattern": "*fused::*", "min_sm": 75}]))
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        fails = [r["message"] for r in doc["results"] if r["status"] == "fail"]
        self.assertEqual(len(fails), len(ARCHS))
        self.assertTrue(all("plain_kernel<float>" in m and "0 tensor-core" in m for m in fails))
        # exclude takes the helper out again.
        proc, _ = self.run_audit(["mma.o"], self.rules([{"pattern": "*fused::*", "exclude": ["*plain_kernel*"]}]))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_missing_pattern_waits_for_its_sources(self):
        rule = {"pattern": "width64::*", "present_if_object": ["*width64*"]}
        proc, doc = self.run_audit(["mma.o"], self.rules([rule]))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual([r["status"] for r in doc["results"]], ["ok", "skipped"])
        proc, _ = self.run_audit(["mma.o"], self.rules([rule]), "--require-present")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("--require-present", proc.stdout)
        # An object of those sources in the input makes the rule active by itself.
        proc, _ = self.run_audit(["mma.o"], self.rules([dict(rule, present_if_object=["mma.o"])]))
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("its sources are built (mma.o)", proc.stdout)

    def test_archive_members_are_named(self):
        subprocess.run(["ar", "rcs", str(self.tmp / "libfixture.a"), str(self.tmp / "mma.o"), str(self.tmp / "spill.o")],
                       check=True)
        proc, doc = self.run_audit(["libfixture.a"], self.rules())
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual({f["object"] for f in doc["functions"]}, {"mma.o", "spill.o"})

    def test_missing_input_is_an_error(self):
        proc, _ = self.run_audit(["does-not-exist.o"], self.rules())
        self.assertEqual(proc.returncode, 2)
        self.assertIn("input not found", proc.stderr)


if __name__ == "__main__":
    NVCC = find_nvcc()
    missing = [n for n, found in (("nvcc", NVCC), ("cuobjdump", audit.find_tool("cuobjdump")),
                                  ("nvdisasm", audit.find_tool("nvdisasm"))) if not found]
    if missing:
        print(f"skipped: {', '.join(missing)} not found (scripts/audit.sh installs cuobjdump / nvdisasm from PyPI)")
        sys.exit(77)
    unittest.main(verbosity=2)
