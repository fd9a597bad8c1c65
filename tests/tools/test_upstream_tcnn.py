#!/usr/bin/env python3
"""benchmarks/upstream_tcnn.py turns upstream tiny-cuda-nn's programs' output into workload records."""
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("upstream_tcnn", os.path.join(HERE, "..", "..", "benchmarks", "upstream_tcnn.py"))
up = importlib.util.module_from_spec(spec)
spec.loader.exec_module(up)


class Bench(unittest.TestCase):
    def test_fully_fused_rows_in_the_programs_order_and_a_cut_run_keeps_what_it_finished(self):
        lines = []
        for k in range(10):  # 8 fully_fused batches, then 2 of cutlass
            lines.append(f"Iteration#0: loss=1 time=5[µs] thp=1/s\nFinished training benchmark. Mean throughput is {1e6 * (k + 1)}/s. Waiting")
            lines.append(f"Finished inference benchmark. Mean throughput is {2e6 * (k + 1)}/s. Waiting")
        records = up.parse_bench("\n".join(lines), "W2")
        self.assertEqual(len(records), 16)  # the cutlass ones are left out
        first = [r for r in records if r["mode"] == "training"][0]
        self.assertEqual((first["batch"], first["samples_per_s"], first["variant"]), (1 << 21, 1e6, "tcnn"))
        last = [r for r in records if r["mode"] == "inference"][-1]
        self.assertEqual((last["batch"], last["samples_per_s"]), (1 << 14, 16e6))
        cut = up.parse_bench(lines[0] + "\n" + lines[1] + "\n" + lines[2], "W1")
        self.assertEqual([(r["mode"], r["batch"]) for r in cut], [("training", 1 << 21), ("training", 1 << 20), ("inference", 1 << 21)])


class Sample(unittest.TestCase):
    def test_the_last_long_span_with_jit_fusion_named(self):
        text = ("JIT fusion is enabled.\nBeginning optimization with 2001 training steps.\n"
                "Step#0: loss=0.5 time=900000[µs]\nStep#10: loss=0.1 time=5000[µs]\nStep#100: loss=0.05 time=45000[µs]\n"
                "Step#1000: loss=0.01 time=450000[µs]\nStep#2000: loss=0.01 time=400000[µs]\n")
        [r] = up.parse_sample(text, "W1")
        self.assertEqual(r["variant"], "tcnn-jit")
        self.assertAlmostEqual(r["samples_per_s"], 1000 * (1 << 18) / 0.4)
        self.assertEqual(up.parse_sample(text.replace("JIT fusion is enabled", "JIT fusion is unavailable"), "W1")[0]["variant"], "tcnn")
        self.assertEqual(up.parse_sample("Step#0: loss=1 time=5[µs]\n", "W1"), [])


if __name__ == "__main__":
    unittest.main()
