// Each validation rule: the error names the JSON path, the value and what is allowed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "config_test_util.h"

namespace ds {
namespace {

std::string with_batch(const std::string& rest) { return R"({"train_batch_size": 8, )" + rest + "}"; }

TEST(Validation, ZeroStage) {
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": "two"})")),
            "zero_optimization.stage: expected an integer 0..3, got \"two\"");
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": 4})")),
            "zero_optimization.stage: expected an integer 0..3, got 4");
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": -1})")),
            "zero_optimization.stage: expected an integer 0..3, got -1");
}

TEST(Validation, NegativeSizesAndRatio) {
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"reduce_bucket_size": -5})")),
            "zero_optimization.reduce_bucket_size: expected an integer >= 0, got -5");
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": 3, "offload_param": {"buffer_size": -1}})")),
            "zero_optimization.offload_param.buffer_size: expected an integer >= 0, got -1");
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": 3, "offload_optimizer": {"ratio": 1.5}})")),
            "zero_optimization.offload_optimizer.ratio: expected a number in [0.0, 1.0], got 1.5");
  EXPECT_EQ(test::load_error(with_batch(R"("aio": {"block_size": 0})")),
            "aio.block_size: expected an integer >= 1, got 0");
  EXPECT_EQ(test::load_error(with_batch(R"("steps_per_print": 0)")),
            "steps_per_print: expected an integer >= 1 or null, got 0");
}

TEST(Validation, OddAllgatherBucketSizeInStages1And2) {
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": 2, "allgather_bucket_size": 5001})")),
            "zero_optimization.allgather_bucket_size: 5001: allgather_bucket_size must be a multiple of "
            "nccl_start_alignment_factor, 2");
  EXPECT_NO_THROW(test::load(with_batch(R"("zero_optimization": {"stage": 3, "allgather_bucket_size": 5001})")));
}

TEST(Validation, Fp16AndBf16Together) {
  EXPECT_CONFIG_ERROR(with_batch(R"("fp16": {"enabled": true}, "bf16": {"enabled": true})"),
                      "bf16.enabled:", "bfloat16 and fp16 modes cannot be simultaneously enabled");
}

TEST(Validation, CommunicationDataType) {
  EXPECT_EQ(test::load_error(with_batch(R"("communication_data_type": "int8")")),
            "communication_data_type: expected one of \"fp16\", \"bf16\", \"fp32\" (any case), got \"int8\"");
  const Config c = test::load(with_batch(R"("communication_data_type": "FP16")"));
  EXPECT_EQ(c.communication_data_type, DType::Fp16);
  EXPECT_EQ(test::value_of(c, "communication_data_type"), "\"fp16\"");
  const Config bf = test::load(with_batch(R"("bf16": {"enabled": true})"));
  EXPECT_FALSE(bf.communication_data_type.has_value());
  EXPECT_EQ(bf.effective_communication_data_type(), DType::Bf16);
  EXPECT_EQ(test::value_of(bf, "seq_parallel_communication_data_type"), "\"fp32\"");
}

TEST(Validation, SeqParallelCommunicationDataTypeReplacesItUnderSequenceParallelism) {
  // DeepSpeed's engine: with sequence_parallel_size > 1, communication_data_type := this key (default
  // fp32; null = by mode); at size 1 it is read and has no effect.
  const std::string bf16 = R"("bf16": {"enabled": true}, )";
  EXPECT_EQ(test::load(with_batch(bf16 + R"("sequence_parallel_size": 2)"), 2).effective_communication_data_type(),
            DType::Fp32);
  EXPECT_EQ(test::load(with_batch(bf16 + R"("sequence_parallel_size": 2, "communication_data_type": "fp16")"), 2)
                .effective_communication_data_type(),
            DType::Fp32);
  const Config sp = test::load(
      with_batch(bf16 + R"("sequence_parallel_size": 2, "seq_parallel_communication_data_type": "FP16")"), 2);
  EXPECT_EQ(sp.effective_communication_data_type(), DType::Fp16);
  EXPECT_EQ(test::value_of(sp, "seq_parallel_communication_data_type"), "\"fp16\"");
  EXPECT_EQ(test::load(with_batch(bf16 + R"("sequence_parallel_size": 2, "seq_parallel_communication_data_type": null)"), 2)
                .effective_communication_data_type(),
            DType::Bf16);
  const Config no_sp = test::load(with_batch(bf16 + R"("seq_parallel_communication_data_type": "fp16")"));
  EXPECT_EQ(no_sp.effective_communication_data_type(), DType::Bf16);
  EXPECT_TRUE(no_sp.warnings.empty()) << no_sp.warnings.front();
  EXPECT_EQ(test::load_error(with_batch(R"("seq_parallel_communication_data_type": "int8")")),
            "seq_parallel_communication_data_type: expected one of \"fp16\", \"bf16\", \"fp32\" (any case), got \"int8\"");
}

TEST(Validation, CheckpointTagValidation) {
  EXPECT_EQ(test::load_error(with_batch(R"("checkpoint": {"tag_validation": "foo"})")),
            "checkpoint.tag_validation: expected one of \"Warn\", \"Ignore\", \"Fail\" (any case), got \"foo\"");
  EXPECT_EQ(test::load(with_batch(R"("checkpoint": {"tag_validation": "FAIL"})")).checkpoint.tag_validation,
            TagValidation::Fail);
  EXPECT_EQ(test::load(with_batch(R"("checkpoint": {"tag_validation": "ignore"})")).checkpoint.tag_validation,
            TagValidation::Ignore);
  EXPECT_EQ(test::load_error(with_batch(R"("checkpoint": {"parallel_write": {"pipeline_stage": 1}})")),
            "checkpoint.parallel_write.pipeline_stage: expected true or false, got 1");
}

TEST(Validation, PartialOffloadNeedsStage3) {
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.3}})")),
            "zero_optimization.offload_optimizer.ratio: 0.3: Partial offloading only supported for ZeRO Stage 3 "
            "(stage is 2)");
  // DeepSpeed takes it at stage 3; deepspeed.cpp does not do partial offload, and says so at load time.
  try {
    test::load(with_batch(R"("zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.3}})"));
    ADD_FAILURE() << "partial offload must be refused";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("zero_optimization.offload_optimizer.ratio: 0.3 asks for partial offload"),
              std::string::npos) << e.what();
  }
}

// DeepSpeed ignores offload_param below stage 3: one warning, and the config loads.
TEST(Validation, OffloadParamBelowStage3WarnsOnceAndIsIgnored) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}})"));
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings.front(),
            "zero_optimization.offload_param: device \"cpu\" is ignored at stage 2: parameter offload is for ZeRO "
            "stage 3 only, and DeepSpeed ignores it below; parameters stay on the device (set \"stage\": 3 to "
            "offload them, or remove offload_param)");
  EXPECT_EQ(c.zero_optimization.stage, 2);
  // device "none" is the absent offload: fine at any stage.
  EXPECT_NO_THROW(test::load(with_batch(R"("zero_optimization": {"stage": 1, "offload_param": {"device": "none"}})")));
  EXPECT_CONFIG_ERROR(with_batch(R"("zero_optimization": {"offload_optimizer": {"device": "cpu"}})"),
                      "zero_optimization.offload_optimizer: optimizer offload requires ZeRO stage 1, 2 or 3");
}

TEST(Validation, OffloadDevice) {
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": 3, "offload_param": {"device": "gpu"}})")),
            "zero_optimization.offload_param.device: expected one of \"none\", \"cpu\", \"nvme\", got \"gpu\"");
  EXPECT_EQ(test::load_error(with_batch(R"("zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}})")),
            "zero_optimization.offload_optimizer.nvme_path: required when device is \"nvme\" (a directory on a "
            "local NVMe SSD)");
  const Config c = test::load(with_batch(
      R"("zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}})"));
  EXPECT_EQ(c.zero_optimization.offload_param.device, OffloadDevice::Nvme);
  EXPECT_EQ(c.zero_optimization.offload_param.nvme_path, "/local_nvme");
}

TEST(Validation, NvmeOptimizerOffloadInStage2SwapsToNvme) {
  // DeepSpeed treats "nvme" as "cpu" at stages 1-2; deepspeed.cpp swaps to NVMe there (docs/offload.md).
  const Config c = test::load(with_batch(
      R"("zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": "/x"}})"));
  EXPECT_EQ(c.zero_optimization.offload_optimizer.device, OffloadDevice::Nvme);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
}

TEST(Validation, AmpRules) {
  EXPECT_CONFIG_ERROR(with_batch(R"("amp": {"enabled": true, "opt_level": "O1"}, "zero_optimization": {"stage": 1})"),
                      "amp.enabled:", "Amp and ZeRO are not currently compatible");
  EXPECT_CONFIG_ERROR(with_batch(R"("amp": {"enabled": true}, "fp16": {"enabled": true})"),
                      "amp.enabled:", "Cannot enable both amp with (legacy) fp16 mode");
  const Config c = test::load(with_batch(R"("amp": {"enabled": true, "opt_level": "O1"})"));
  EXPECT_TRUE(c.amp.enabled);
  EXPECT_EQ(c.amp.params_json, R"({"opt_level":"O1"})");
  EXPECT_TRUE(test::has_warning(c, "amp is parsed but not supported by deepspeed.cpp yet; ignored"));
}

TEST(Validation, Fp16MasterWeightsNeedStage2) {
  EXPECT_EQ(test::load_error(with_batch(R"("fp16": {"enabled": true, "fp16_master_weights_and_grads": true},
                                           "zero_optimization": {"stage": 3})")),
            "fp16.fp16_master_weights_and_grads: true with ZeRO stage 3: Fp16_master_weights_and_grads is only "
            "supported with ZeRO Stage 2 for now.");
  // Stage 2 passes DeepSpeed's rule, but deepspeed.cpp has no fp16 master weights: refused at load time.
  EXPECT_THROW(test::load(with_batch(R"("fp16": {"enabled": true, "fp16_master_weights_and_grads": true},
                                       "zero_optimization": {"stage": 2})")),
               NotSupported);
}

// DeepSpeed still accepts legacy_stage1 and ignores it.
TEST(Validation, LegacyStage1WarnsAndIsIgnored) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 1, "legacy_stage1": true})"));
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings.front(), "zero_optimization.legacy_stage1: true is ignored: the legacy ZeRO stage 1 was "
                                "removed from DeepSpeed, which still accepts the key and ignores it; remove it");
}

// Switches of DeepSpeed's Python implementation with no counterpart here: a non-default value warns
// once each, naming what deepspeed.cpp does; DeepSpeed's defaults say nothing.
TEST(Validation, ImplementationSwitchesWithoutEffectWarnWhenChanged) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 2, "contiguous_gradients": false,
      "allgather_partitions": false, "use_multi_rank_bucket_allreduce": false, "elastic_checkpoint": true,
      "ignore_unused_parameters": false, "override_module_apply": false, "pipeline_loading_checkpoint": true,
      "enable_sanity_checks": true, "use_all_reduce_for_fetch_params": true, "module_granularity_threshold": 5,
      "load_from_fp32_weights": false})"));
  for (const char* key : {"contiguous_gradients: false", "allgather_partitions: false",
                          "use_multi_rank_bucket_allreduce: false", "elastic_checkpoint: true",
                          "override_module_apply: false",
                          "pipeline_loading_checkpoint: true", "enable_sanity_checks: true",
                          "use_all_reduce_for_fetch_params: true", "module_granularity_threshold: 5"})
    EXPECT_TRUE(test::has_warning(c, "zero_optimization." + std::string(key) + " has no effect in deepspeed.cpp: "))
        << key;
  EXPECT_EQ(c.warnings.size(), 9u) << "load_from_fp32_weights false and ignore_unused_parameters false are honoured "
                                       "at stage 2";
  EXPECT_TRUE(test::load(with_batch(R"("zero_optimization": {"stage": 2})")).warnings.empty());
  // Stage 3 always loads its fp32 partitions, as DeepSpeed's does.
  const Config s3 = test::load(with_batch(R"("zero_optimization": {"stage": 3, "load_from_fp32_weights": false})"));
  EXPECT_TRUE(test::has_warning(s3, "zero_optimization.load_from_fp32_weights: false is ignored at stage 3"));
  // DeepSpeed checks for unused parameters at stages 1-2 only.
  for (int stage : {0, 3}) {
    const Config u = test::load(with_batch(
        fmt::format(R"("zero_optimization": {{"stage": {}, "ignore_unused_parameters": false}})", stage)));
    EXPECT_TRUE(test::has_warning(
        u, fmt::format("zero_optimization.ignore_unused_parameters: false is ignored at stage {}", stage)));
  }
}

// The same outside zero_optimization: DeepSpeed keys whose non-default value changes nothing here.
TEST(Validation, OtherSectionsKeysWithoutEffectWarnWhenChanged) {
  const Config c = test::load(R"({"train_batch_size": 8, "sequence_parallel_size": 1,
      "bf16": {"enabled": true, "immediate_grad_update": true},
      "optimizer": {"type": "AdamW", "params": {"torch_adam": true}},
      "checkpoint": {"load_universal": true, "use_node_local_storage": true, "parallel_write": {"pipeline_stage": true}},
      "dump_state": true, "sparse_gradients": true, "memory_breakdown": true,
      "tensor_parallel": {"autotp_size": 1, "tp_overlap_comm": true, "preset_model": "llama", "kernel_inject": false},
      "activation_checkpointing": {"partition_activations": true, "number_checkpoints": 2,
                                   "contiguous_memory_optimization": true},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp", "fast_init": true},
                            "offload_param": {"device": "nvme", "nvme_path": "/tmp", "max_in_cpu": 5}},
      "autotuning": {"mp_size": 2, "min_train_batch_size": 4, "model_info": {"num_params": 100},
                     "arg_mappings": {"train_micro_batch_size_per_gpu": "--batch"}}})");
  for (const char* key : {"bf16.immediate_grad_update: true", "optimizer.params.torch_adam: true",
                          "checkpoint.load_universal: true", "checkpoint.use_node_local_storage: true",
                          "checkpoint.parallel_write.pipeline_stage: true", "dump_state: true", "sparse_gradients: true",
                          "tensor_parallel.preset_model: \"llama\"",
                          "activation_checkpointing.contiguous_memory_optimization: true",
                          "zero_optimization.offload_optimizer.fast_init: true",
                          "zero_optimization.offload_param.max_in_cpu: 5", "autotuning.mp_size: 2",
                          "autotuning.min_train_batch_size: 4", "autotuning.model_info.num_params: 100"})
    EXPECT_TRUE(test::has_warning(c, std::string(key) + " has no effect in deepspeed.cpp: ")) << key;
  EXPECT_TRUE(test::has_warning(c, "tensor_parallel.tp_overlap_comm has no effect without"));
  // Implemented, so silent: memory_breakdown (a memory line), arg_mappings (ds-autotune's commands),
  // kernel_inject false (DeepSpeed's "off"); partition_activations is DeepSpeed's no-op without AutoTP.
  for (const char* quiet : {"memory_breakdown", "arg_mappings", "kernel_inject", "partition_activations"})
    EXPECT_FALSE(test::has_warning(c, quiet)) << quiet;
  EXPECT_EQ(c.warnings.size(), 15u);
  const Config tp = test::load(R"({"train_batch_size": 8, "tensor_parallel": {"autotp_size": 2},
      "activation_checkpointing": {"partition_activations": true}})", 2);
  EXPECT_TRUE(test::has_warning(tp, "activation_checkpointing.partition_activations is parsed but not supported"));
}

TEST(Validation, UnknownKeyInStrictSectionsIsAnError) {
  EXPECT_CONFIG_ERROR(with_batch(R"("zero_optimization": {"stage": 2, "reduce_bucket_sise": 100})"),
                      "zero_optimization.reduce_bucket_sise: unknown key (did you mean \"reduce_bucket_size\"?)",
                      "DeepSpeed validates \"zero_optimization\" strictly", "allowed keys:", "overlap_comm");
  EXPECT_CONFIG_ERROR(with_batch(R"("zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "pin": true}})"),
                      "zero_optimization.offload_param.pin: unknown key");
  EXPECT_CONFIG_ERROR(with_batch(R"("zero_optimization": {"stage": 1, "offload_optimizer": {"devce": "cpu"}})"),
                      "zero_optimization.offload_optimizer.devce: unknown key (did you mean \"device\"?)");
  for (const char* monitor : {"tensorboard", "csv_monitor", "wandb", "comet"}) {
    EXPECT_CONFIG_ERROR(with_batch("\"" + std::string(monitor) + R"(": {"enabled": false, "outptu_path": "x"})"),
                        std::string(monitor) + ".outptu_path: unknown key");
  }  // comms_logger is DeepSpeed's CommsLoggerConfig (a strict model too).
  EXPECT_CONFIG_ERROR(with_batch(R"("comms_logger": {"enabled": true, "prof_op": ["all_reduce"]})"),
                      "comms_logger.prof_op: unknown key (did you mean \"prof_ops\"?)");
  EXPECT_CONFIG_ERROR(with_batch(R"("comms_logger": {"enabled": true, "prof_ops": "all_reduce"})"),
                      "comms_logger.prof_ops: \"all_reduce\": expected a list of operation names");
}

TEST(Validation, ThroughputTimerIsDeepSpeedsTimersThroughput) {
  EXPECT_TRUE(test::load(with_batch("")).throughput_timer);
  const Config off = test::load(with_batch(R"("timers": {"throughput": {"enabled": false, "synchronized": true}})"));
  EXPECT_FALSE(off.throughput_timer);
  EXPECT_TRUE(off.warnings.empty()) << "timers is implemented";
  EXPECT_TRUE(test::has_warning(test::load(with_batch(R"("timers": {"throughput": {"synchronized": false}})")),
                                "timers.throughput.synchronized: false has no effect in deepspeed.cpp"));
  EXPECT_CONFIG_ERROR(with_batch(R"("timers": {"throughput": {"enable": false}})"),
                      "timers.throughput.enable: unknown key (did you mean \"enabled\"?)");
}

TEST(Validation, CommsLoggerIsReadWithDeepSpeedsDefaults) {
  const Config d = test::load(with_batch(R"("comms_logger": {"enabled": true})"));
  EXPECT_TRUE(d.comms_logger.enabled);
  EXPECT_FALSE(d.comms_logger.verbose);
  EXPECT_TRUE(d.comms_logger.prof_all);
  EXPECT_FALSE(d.comms_logger.debug);
  EXPECT_TRUE(d.comms_logger.prof_ops.empty());
  EXPECT_TRUE(d.warnings.empty()) << "comms_logger is implemented";
  const Config c = test::load(with_batch(R"("comms_logger": {"enabled": true, "verbose": true, "prof_all": false,
      "debug": true, "prof_ops": ["all_reduce", "all_gather_into_tensor"]})"));
  EXPECT_TRUE(c.comms_logger.verbose);
  EXPECT_FALSE(c.comms_logger.prof_all);
  EXPECT_TRUE(c.comms_logger.debug);
  EXPECT_EQ(c.comms_logger.prof_ops, (std::vector<std::string>{"all_reduce", "all_gather_into_tensor"}));
}

TEST(Validation, CurriculumLearningIsDeepSpeedsLegacySection) {
  const Config c = test::load(with_batch(R"("curriculum_learning": {"enabled": true, "curriculum_type": "seqlen",
      "min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_root",
      "schedule_config": {"total_curriculum_step": 100, "difficulty_step": 8, "root_degree": 2}})"));
  EXPECT_TRUE(c.curriculum_learning.enabled);
  EXPECT_EQ(c.curriculum_learning.curriculum_type, "seqlen");
  EXPECT_EQ(c.curriculum_learning.schedule_type, CurriculumSchedule::FixedRoot);
  EXPECT_EQ(c.curriculum_learning.total_curriculum_step, 100);
  EXPECT_EQ(c.curriculum_learning.root_degree, 2.0);
  EXPECT_TRUE(c.warnings.empty()) << "curriculum_learning is implemented";
  const Config d = test::load(with_batch(R"("curriculum_learning": {"enabled": true, "curriculum_type": "seqlen",
      "min_difficulty": 1, "max_difficulty": 5, "schedule_type": "fixed_discrete",
      "schedule_config": {"difficulty": [1, 2, 5], "max_step": [2, 4]}})"));
  EXPECT_EQ(d.curriculum_learning.difficulty, (std::vector<int64_t>{1, 2, 5}));
  EXPECT_EQ(d.curriculum_learning.max_step, (std::vector<int64_t>{2, 4}));
  // What DeepSpeed asserts (or fails on at the first forward) is an error naming the key.
  const std::string on = R"("curriculum_learning": {"enabled": true, )";
  EXPECT_CONFIG_ERROR(with_batch(on + R"("min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_linear"})"),
                      "curriculum_learning.curriculum_type: is required when curriculum_learning is enabled");
  EXPECT_CONFIG_ERROR(with_batch(on + R"("curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64,
      "schedule_type": "fixed_linear", "schedule_config": {"difficulty_step": 8}})"),
                      "curriculum_learning.schedule_config.total_curriculum_step: is required by "
                      "curriculum_learning.schedule_type \"fixed_linear\"");
  EXPECT_CONFIG_ERROR(with_batch(on + R"("curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64,
      "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 0}})"),
                      "curriculum_learning.schedule_config.difficulty_step");
  EXPECT_CONFIG_ERROR(with_batch(on + R"("curriculum_type": "seqlen", "min_difficulty": 1, "max_difficulty": 5,
      "schedule_type": "fixed_discrete", "schedule_config": {"difficulty": [1, 5], "max_step": [2, 4]}})"),
                      "2 difficulties for 2 max_step entries");
  EXPECT_CONFIG_ERROR(with_batch(on + R"("curriculum_type": "seqlen", "min_difficulty": 1, "max_difficulty": 5,
      "schedule_type": "fixed_cosine"})"),
                      "curriculum_learning.schedule_type");
  const Config odd = test::load(with_batch(on + R"("curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64,
      "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 4},
      "curriculum_typo": 1})"));
  EXPECT_TRUE(test::has_warning(odd, "curriculum_learning.schedule_config.difficulty_step: 4 is not a multiple of 8"));
  EXPECT_TRUE(test::has_warning(odd, "curriculum_learning.curriculum_typo: unknown key"));
  // Off, the section's schedule keys are not required (DeepSpeed builds no scheduler).
  EXPECT_FALSE(test::load(with_batch(R"("curriculum_learning": {"enabled": false, "schedule_type": "fixed_linear"})"))
                   .curriculum_learning.enabled);
}

TEST(Validation, ProgressiveLayerDropHasDeepSpeedsDefaults) {
  const Config d = test::load(with_batch(R"("progressive_layer_drop": {"enabled": true})"));
  EXPECT_TRUE(d.progressive_layer_drop.enabled);
  EXPECT_EQ(d.progressive_layer_drop.theta, 1.0);
  EXPECT_EQ(d.progressive_layer_drop.gamma, 0.001);
  EXPECT_TRUE(d.warnings.empty()) << "progressive_layer_drop is implemented";
  const Config c = test::load(with_batch(R"("progressive_layer_drop": {"enabled": true, "theta": 0.5, "gamma": 0.01})"));
  EXPECT_EQ(c.progressive_layer_drop.theta, 0.5);
  EXPECT_EQ(c.progressive_layer_drop.gamma, 0.01);
  EXPECT_CONFIG_ERROR(with_batch(R"("progressive_layer_drop": {"enabled": true, "theta": 0})"),
                      "progressive_layer_drop.theta");
  EXPECT_CONFIG_ERROR(with_batch(R"("progressive_layer_drop": {"enabled": true, "gamma": -1})"),
                      "progressive_layer_drop.gamma");
}

TEST(Validation, UnknownKeyElsewhereIsOneWarningEach) {
  const Config c = test::load(with_batch(R"("train_batch_sise": 3, "fp16": {"enabeld": true}, "aio": {"x": 1})"));
  ASSERT_EQ(c.warnings.size(), 3u);
  EXPECT_TRUE(test::has_warning(c, "train_batch_sise: unknown key; ignored (did you mean \"train_batch_size\"?)"));
  EXPECT_TRUE(test::has_warning(c, "fp16.enabeld: unknown key; ignored (did you mean \"enabled\"?)"));
  EXPECT_TRUE(test::has_warning(c, "aio.x: unknown key; ignored"));
  EXPECT_FALSE(c.fp16.enabled);
}

TEST(Validation, UnsupportedSectionsWarnByName) {
  const Config c = test::load(with_batch(R"("pipeline": {"partition": "uniform"}, "eigenvalue": {"enabled": true},
      "sparse_attention": {"mode": "fixed"}, "nebula": {"enabled": false}, "autotuning": {},
      "hybrid_engine": false, "zero_optimization": {"stage": 3, "mics_shard_size": 2,
      "zero_quantized_weights": true, "zero_quantized_gradients": true})"));
  EXPECT_TRUE(test::has_warning(c, "pipeline is parsed but not supported by deepspeed.cpp yet; ignored (the "
                                   "pipeline engine reads stages and activation_checkpoint_interval)"));
  EXPECT_TRUE(test::has_warning(c, "eigenvalue is parsed but not supported"));
  EXPECT_TRUE(test::has_warning(c, "sparse_attention is parsed but not supported"));
  EXPECT_TRUE(test::has_warning(c, "zero_optimization.mics_shard_size is parsed but not supported"));
  EXPECT_FALSE(test::has_warning(c, "zero_quantized_weights")) << "qwZ runs at stage 3";
  EXPECT_FALSE(test::has_warning(c, "zero_quantized_gradients")) << "qgZ runs at stage 3";
  // Switched off or empty: nothing to warn about.
  EXPECT_FALSE(test::has_warning(c, "nebula"));
  EXPECT_FALSE(test::has_warning(c, "autotuning"));
  EXPECT_FALSE(test::has_warning(c, "hybrid_engine"));
  EXPECT_EQ(c.warnings.size(), 4u);
}

TEST(Validation, OverlapParamGatherOutsideStagesOneAndTwoIsIgnoredWithAWarning) {
  for (int stage : {0, 3}) {
    const Config c = test::load(with_batch(fmt::format(R"("zero_optimization": {{"stage": {}}},
        "zero_overlap_param_gather": true)", stage)));
    EXPECT_TRUE(c.zero_overlap_param_gather);
    EXPECT_TRUE(test::has_warning(c, "zero_overlap_param_gather: true applies to ZeRO stages 1 and 2")) << stage;
  }
  for (int stage : {1, 2}) {
    const Config c = test::load(with_batch(fmt::format(R"("zero_optimization": {{"stage": {}}},
        "zero_overlap_param_gather": true)", stage)));
    EXPECT_FALSE(test::has_warning(c, "zero_overlap_param_gather")) << stage;
  }
  EXPECT_FALSE(test::load(R"({"train_batch_size": 8})").zero_overlap_param_gather);  // off unless asked for
  const Config rr = test::load(with_batch(R"("zero_optimization": {"stage": 3, "round_robin_gradients": true})"));
  EXPECT_TRUE(test::has_warning(rr, "zero_optimization.round_robin_gradients: true applies to ZeRO stages 1 and 2"));
}

TEST(Validation, QuantizedWeightsBelowStageThreeAreIgnoredWithAWarning) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 2, "zero_quantized_weights": true})"));
  EXPECT_TRUE(test::has_warning(c, "zero_optimization.zero_quantized_weights: true only applies to ZeRO stage 3, the "
                                   "stage that gathers parameters; ignored at stage 2"));
  const Config g = test::load(with_batch(R"("zero_optimization": {"stage": 1, "zero_quantized_gradients": true,
      "zero_hpz_partition_size": 8, "zero_quantized_nontrainable_weights": true})"));
  EXPECT_TRUE(test::has_warning(g, "zero_optimization.zero_quantized_gradients: true only applies to ZeRO stage 3"));
  EXPECT_TRUE(test::has_warning(g, "zero_optimization.zero_hpz_partition_size: 8 only applies to ZeRO stage 3"));
  EXPECT_TRUE(test::has_warning(g, "zero_optimization.zero_quantized_nontrainable_weights: true has no effect"));
  // qwZ with the shards on NVMe runs (each gather reads, then quantizes): no refusal.
  EXPECT_NO_THROW((void)test::load(with_batch(R"("zero_optimization": {"stage": 3, "zero_quantized_weights": true,
        "offload_param": {"device": "nvme", "nvme_path": "/tmp"}})")));
}

TEST(Validation, FlopsProfilerTurnsOnWallClockBreakdown) {
  const Config c = test::load(with_batch(R"("flops_profiler": {"enabled": true})"));
  EXPECT_TRUE(c.wall_clock_breakdown);
  EXPECT_EQ(test::source_of(c, "wall_clock_breakdown"), "derived");
}

TEST(Validation, VocabularySizeAlignmentWarns) {
  EXPECT_TRUE(test::has_warning(test::load(with_batch(R"("vocabulary_size": 50257)")), "vocabulary_size: 50257"));
  EXPECT_TRUE(test::load(with_batch(R"("vocabulary_size": 50304)")).warnings.empty());
}

}  // namespace
}  // namespace ds
