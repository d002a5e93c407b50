#!/usr/bin/python3
"""Regenerates tests/config/fuzz_corpus_config/ (seeds for fuzz_config) and tests/config/config.dict.

Seeds: every examples/configs/*.json (valid_example_*), the issue-22 reproductions (deep nesting,
1e400, INT64_MAX batch, initial_scale_power 1000, loss_scale 1e39, the all-"auto" template, the
NVMe example with too few swap buffers) and malformed inputs (duplicate keys, trailing garbage, bad
UTF-8, an unterminated comment) and the hjson extras (trailing commas, # comments). valid_* must load at world size 1, bad_* must be rejected
(fuzz_config_replay checks both); crash-* files are inputs libFuzzer found, kept as regressions.
Run from anywhere: python3 tests/config/make_fuzz_corpus.py
"""
import glob
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "fuzz_corpus_config")

HF_TEMPLATE = """{
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
           "hysteresis": 2, "min_loss_scale": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                               "warmup_num_steps": "auto"}},
  "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "offload_param": {"device": "cpu", "pin_memory": true}, "overlap_comm": true, "contiguous_gradients": true,
    "sub_group_size": 1e9, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": true},
  "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
  "train_batch_size": "auto", "train_micro_batch_size_per_gpu": %s, "wall_clock_breakdown": false
}
"""

SEEDS = {
    "valid_hf_auto_template.json": HF_TEMPLATE % "4",
    "bad_hf_auto_template_micro_auto.json": HF_TEMPLATE % '"auto"',
    "bad_deep_arrays_100000.json": '{"train_batch_size": 1, "x": ' + "[" * 100000 + "]" * 100000 + "}",
    "bad_deep_objects_1000.json": '{"a":' * 1000 + "1" + "}" * 1000,
    "valid_depth_64.json": '{"train_batch_size": 1, "x": ' + "[" * 63 + "]" * 63 + "}",
    "bad_lr_1e400.json": '{"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"lr": 1e400}}}',
    "bad_negative_1e400_in_array.json": '{"train_batch_size": 1, "x": [1, -1e400]}',
    "valid_underflow_1e-400.json": '{"train_batch_size": 1, "gradient_clipping": 1e-400}',
    "bad_micro_int64_max.json": '{"train_micro_batch_size_per_gpu": 9223372036854775807}',
    "bad_micro_uint64_max.json": '{"train_micro_batch_size_per_gpu": 18446744073709551615}',
    "bad_batch_product_overflow.json": '{"train_micro_batch_size_per_gpu": 2000000000, "gradient_accumulation_steps": 2000000000}',
    "bad_negative_huge_batch.json": '{"train_micro_batch_size_per_gpu": -9223372036854775808, "gradient_accumulation_steps": -3}',
    "bad_initial_scale_power_1000.json": '{"train_batch_size": 1, "fp16": {"enabled": true, "initial_scale_power": 1000}}',
    "valid_initial_scale_power_64.json": '{"train_batch_size": 1, "fp16": {"enabled": true, "initial_scale_power": 64}}',
    "bad_loss_scale_1e39.json": '{"train_batch_size": 1, "fp16": {"enabled": true, "loss_scale": 1e39}}',
    "valid_loss_scale_1e10.json": '{"train_batch_size": 1, "fp16": {"enabled": true, "loss_scale": 1e10}}',
    "bad_duplicate_key.json": '{"train_batch_size": 1, "zero_optimization": {"stage": 1, "stage": 2}}',
    "bad_trailing_garbage.json": '{"train_batch_size": 1} trailing',
    "bad_not_an_object.json": "[1, 2, 3]",
    "bad_empty.json": "",
    "bad_unterminated_comment.json": '{"train_batch_size": 1} /* never closed',
    "valid_comments.json": '// a comment\n{"train_batch_size": 1, /* inline */ "s": "// not a comment"}\n',
    "bad_invalid_utf8.json": b'{"train_batch_size": 1, "x": "\xff\xfe"}',
    "valid_unicode_key.json": '{"train_batch_size": 1, "\\u00fcnknown": "\u00e9"}',
    "bad_nvme_buffer_count_4.json": '{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Adam"}, '
                                    '"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", '
                                    '"nvme_path": "/x", "buffer_count": 4, "pipeline_read": true, "pipeline_write": true}}}',
    "bad_partial_offload.json": '{"train_batch_size": 2, "optimizer": {"type": "Adam"}, "zero_optimization": '
                                '{"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}}',
    "bad_schedule_without_optimizer.json": '{"train_batch_size": 2, "scheduler": {"type": "WarmupLR"}}',
    "valid_hjson_extras.json": '# hjson, as DeepSpeed reads configs\n{"train_batch_size": 1, # note\n'
                               ' "optimizer": {"type": "Adam", "params": {"betas": [0.9, 0.99,],},}, "s": "#x",}\n',
    "bad_hjson_double_comma.json": '{"train_batch_size": 1, "x": [1,,]}',
    "bad_hjson_leading_comma.json": '{,"train_batch_size": 1}',
    "bad_sequence_parallel_not_dividing.json": '{"train_batch_size": 4, "sequence_parallel_size": 3}',
    "valid_offload_param_below_stage3.json": '{"train_batch_size": 1, "zero_optimization": {"stage": 2, '
                                             '"offload_param": {"device": "cpu"}, "legacy_stage1": true}}',
    "bad_warmup_num_steps_0.json": '{"train_batch_size": 1, "optimizer": {"type": "Adam"}, "scheduler": '
                                   '{"type": "WarmupLR", "params": {"warmup_num_steps": 0}}}',
    "valid_every_section.json": '{"train_batch_size": 8, "gradient_accumulation_steps": 2, "steps_per_print": 5, '
        '"gradient_clipping": 1.0, "communication_data_type": "FP32", "bf16": {"enabled": true}, '
        '"data_types": {"grad_accum_dtype": "fp32"}, "optimizer": {"type": "Lion", "params": {"lr": 1e-4, '
        '"betas": [0.9, 0.99]}}, "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 1e-5, '
        '"cycle_max_lr": 1e-4}}, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1e6, '
        '"offload_param": {"device": "nvme", "nvme_path": "/x"}}, "aio": {"block_size": 4096, "queue_depth": 4}, '
        '"activation_checkpointing": {"number_checkpoints": 2}, "flops_profiler": {"enabled": true}, '
        '"csv_monitor": {"enabled": true}, "checkpoint": {"tag_validation": "fail"}, "elasticity": {"enabled": true, "max_train_batch_size": 8, "micro_batch_sizes": [4], "version": 0.1, "ignore_non_elastic_batch_info": true}}',
}

DICT = """# libFuzzer dictionary for fuzz_config: DeepSpeed's keys and values, and JSON punctuation.
# Regenerated by make_fuzz_corpus.py from the keys the loader records (src/config/*.cpp).
"\\"auto\\""
"true"
"false"
"null"
"1e400"
"9223372036854775807"
"-1"
"0.0"
"1e30"
"//"
"#"
",}"
",]"
"/*"
"*/"
"{}"
"[]"
"""


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in glob.glob(os.path.join(OUT, "valid_*")) + glob.glob(os.path.join(OUT, "bad_*")):
        os.remove(f)
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "configs", "*.json"))):
        with open(path, "rb") as src, open(os.path.join(OUT, "valid_example_" + os.path.basename(path)), "wb") as dst:
            dst.write(src.read())
    for name, text in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
    keys, values = set(), set()
    for src in glob.glob(os.path.join(ROOT, "src", "config", "*.cpp")):
        code = open(src, encoding="utf-8").read()
        keys.update(re.findall(r'(?:read|read_enum|take|raw|given|alias|mark_known)\("([a-z0-9_]+)"', code))
        keys.update(re.findall(r'\{"([a-z0-9_]+)", ?&', code))
        keys.update(re.findall(r'"([a-z][a-z0-9_]+)", "(?:stage3_)?', code))
        values.update(re.findall(r'\{"([A-Za-z0-9_.]+)", (?:DType|OffloadDevice|TagValidation|WarmupType|OptimizerType|SchedulerType)::', code))
    for t in ("Adam", "AdamW", "Adagrad", "Lamb", "Lion", "SGD", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
              "OneCycle", "LRRangeTest"):
        values.add(t)
    with open(os.path.join(HERE, "config.dict"), "w") as f:
        f.write(DICT)
        for k in sorted(keys):
            f.write('"\\"%s\\":"\n' % k)
        for v in sorted(values):
            f.write('"\\"%s\\""\n' % v)


if __name__ == "__main__":
    main()
