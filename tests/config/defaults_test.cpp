// DeepSpeed's code defaults (reference §1.3-1.7, §12, §14) for a config that sets only the batch.
#include <gtest/gtest.h>

#include <limits>

#include "config_test_util.h"

namespace ds {
namespace {

class Defaults : public ::testing::Test {
 protected:
  Config c = test::load(R"({"train_batch_size": 8})");
};

TEST_F(Defaults, TopLevelScalars) {
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(c.gradient_accumulation_steps, 1);
  EXPECT_FALSE(c.steps_per_print.has_value());  // code default None (docs say 10)
  EXPECT_EQ(c.gradient_clipping, 1.0);  // DeepSpeed 0.19 (PR #8068); 0.0 through 0.18
  EXPECT_FALSE(c.prescale_gradients);
  EXPECT_EQ(c.gradient_predivide_factor, 1.0);
  EXPECT_FALSE(c.communication_data_type.has_value());
  EXPECT_EQ(c.effective_communication_data_type(), DType::Fp32);
  EXPECT_FALSE(c.wall_clock_breakdown);
  EXPECT_FALSE(c.memory_breakdown);
  EXPECT_FALSE(c.dump_state);
  EXPECT_FALSE(c.sparse_gradients);
  EXPECT_FALSE(c.zero_allow_untested_optimizer);
  EXPECT_TRUE(c.zero_force_ds_cpu_optimizer);
  EXPECT_FALSE(c.dataloader_drop_last);
  EXPECT_FALSE(c.optimizer.has_value());
  EXPECT_FALSE(c.scheduler.has_value());
  EXPECT_TRUE(c.warnings.empty());
}

TEST_F(Defaults, Precision) {
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.fp16.auto_cast);
  EXPECT_EQ(c.fp16.loss_scale, 0.0);
  EXPECT_TRUE(c.fp16.dynamic_loss_scale());
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_FALSE(c.fp16.consecutive_hysteresis);
  EXPECT_EQ(c.fp16.min_loss_scale, 1.0);
  EXPECT_FALSE(c.fp16.fp16_master_weights_and_grads);
  EXPECT_FALSE(c.fp16.dynamic_args_given);
  EXPECT_FALSE(c.bf16.enabled);
  EXPECT_FALSE(c.bf16.immediate_grad_update);
  EXPECT_FALSE(c.data_types.grad_accum_dtype.has_value());
  EXPECT_FALSE(c.amp.enabled);
}

TEST_F(Defaults, Zero) {
  const ZeroConfig& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 0);
  EXPECT_FALSE(z.enabled());
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.reduce_bucket_size, 500000000);
  EXPECT_TRUE(z.use_multi_rank_bucket_allreduce);
  EXPECT_TRUE(z.allgather_partitions);
  EXPECT_EQ(z.allgather_bucket_size, 500000000);
  EXPECT_FALSE(z.overlap_comm);  // None → false below stage 3
  EXPECT_TRUE(z.load_from_fp32_weights);
  EXPECT_FALSE(z.elastic_checkpoint);
  EXPECT_EQ(z.sub_group_size, 1000000000);
  EXPECT_EQ(z.prefetch_bucket_size, 50000000);  // code 5e7; docs say 5e8
  EXPECT_EQ(z.param_persistence_threshold, 100000);
  EXPECT_EQ(z.model_persistence_threshold, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(z.max_live_parameters, 1000000000);
  EXPECT_EQ(z.max_reuse_distance, 1000000000);
  EXPECT_FALSE(z.gather_16bit_weights_on_model_save);
  EXPECT_EQ(z.module_granularity_threshold, 0);
  EXPECT_TRUE(z.ignore_unused_parameters);
  EXPECT_FALSE(z.legacy_stage1);
  EXPECT_FALSE(z.round_robin_gradients);
  EXPECT_EQ(z.zero_hpz_partition_size, 1);
  EXPECT_FALSE(z.zero_quantized_weights);
  EXPECT_FALSE(z.zeropp_loco_param.has_value());
  EXPECT_EQ(z.mics_shard_size, -1);
  EXPECT_TRUE(z.memory_efficient_linear);
  EXPECT_TRUE(z.override_module_apply);
  EXPECT_EQ(z.offload_param.device, OffloadDevice::None);
  EXPECT_FALSE(z.offload_param.nvme_path.has_value());
  EXPECT_EQ(z.offload_param.buffer_count, 5);
  EXPECT_EQ(z.offload_param.buffer_size, 100000000);
  EXPECT_EQ(z.offload_param.max_in_cpu, 1000000000);
  EXPECT_FALSE(z.offload_param.pin_memory);
  EXPECT_EQ(z.offload_optimizer.device, OffloadDevice::None);
  EXPECT_EQ(z.offload_optimizer.buffer_count, 4);
  EXPECT_EQ(z.offload_optimizer.ratio, 1.0);
  EXPECT_FALSE(z.offload_optimizer.pipeline());
  EXPECT_FALSE(z.offload_optimizer.fast_init);
}

TEST_F(Defaults, OverlapCommIsTrueForStage3Only) {
  for (int stage = 0; stage <= 3; ++stage) {
    const Config s = test::load(R"({"train_batch_size": 8, "zero_optimization": {"stage": )" +
                                std::to_string(stage) + "}}");
    EXPECT_EQ(s.zero_optimization.overlap_comm, stage == 3) << "stage " << stage;
    EXPECT_EQ(test::source_of(s, "zero_optimization.overlap_comm"), "derived");
  }
  const Config off = test::load(R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "overlap_comm": false}})");
  EXPECT_FALSE(off.zero_optimization.overlap_comm);
  EXPECT_EQ(test::source_of(off, "zero_optimization.overlap_comm"), "file");
}

TEST_F(Defaults, AioActivationCheckpointingProfilerMonitorsCheckpoint) {
  EXPECT_EQ(c.aio.block_size, 1048576);
  EXPECT_EQ(c.aio.queue_depth, 8);
  EXPECT_EQ(c.aio.intra_op_parallelism, 1);
  EXPECT_FALSE(c.aio.single_submit);
  EXPECT_TRUE(c.aio.overlap_events);
  EXPECT_FALSE(c.aio.use_gds);

  EXPECT_FALSE(c.activation_checkpointing.partition_activations);
  EXPECT_FALSE(c.activation_checkpointing.cpu_checkpointing);
  EXPECT_FALSE(c.activation_checkpointing.contiguous_memory_optimization);
  EXPECT_FALSE(c.activation_checkpointing.number_checkpoints.has_value());
  EXPECT_FALSE(c.activation_checkpointing.synchronize_checkpoint_boundary);
  EXPECT_FALSE(c.activation_checkpointing.profile);

  EXPECT_FALSE(c.flops_profiler.enabled);
  EXPECT_EQ(c.flops_profiler.recompute_fwd_factor, 0.0);
  EXPECT_EQ(c.flops_profiler.profile_step, 1);
  EXPECT_EQ(c.flops_profiler.module_depth, -1);
  EXPECT_EQ(c.flops_profiler.top_modules, 1);  // the constant, not the format string's 3
  EXPECT_TRUE(c.flops_profiler.detailed);
  EXPECT_FALSE(c.flops_profiler.output_file.has_value());

  EXPECT_FALSE(c.tensorboard.enabled);
  EXPECT_EQ(c.tensorboard.output_path, "");
  EXPECT_EQ(c.tensorboard.job_name, "DeepSpeedJobName");
  EXPECT_FALSE(c.csv_monitor.enabled);
  EXPECT_EQ(c.csv_monitor.job_name, "DeepSpeedJobName");
  EXPECT_FALSE(c.wandb.enabled);
  EXPECT_EQ(c.wandb.project, "deepspeed");
  EXPECT_FALSE(c.wandb.group.has_value());
  EXPECT_FALSE(c.comet.enabled);
  EXPECT_EQ(c.comet.samples_log_interval, 100);

  EXPECT_EQ(c.checkpoint.tag_validation, TagValidation::Warn);
  EXPECT_FALSE(c.checkpoint.load_universal);
  EXPECT_FALSE(c.checkpoint.use_node_local_storage);
  EXPECT_FALSE(c.checkpoint.parallel_write.pipeline_stage);
}

TEST_F(Defaults, EveryDefaultIsReportedWithSourceDefault) {
  for (const char* path : {"steps_per_print", "gradient_clipping", "fp16.initial_scale_power", "bf16.enabled",
                           "zero_optimization.stage", "zero_optimization.reduce_bucket_size",
                           "zero_optimization.offload_param.device", "zero_optimization.offload_optimizer.ratio",
                           "aio.block_size", "flops_profiler.top_modules", "checkpoint.tag_validation",
                           "tensorboard.job_name", "comet.api_key", "optimizer", "scheduler",
                           "data_types.grad_accum_dtype", "communication_data_type"}) {
    EXPECT_EQ(test::source_of(c, path), "default") << path;
  }
  EXPECT_EQ(test::value_of(c, "steps_per_print"), "null");
  EXPECT_EQ(test::value_of(c, "zero_optimization.reduce_bucket_size"), "500000000");
  EXPECT_EQ(test::value_of(c, "zero_optimization.offload_param.device"), "\"none\"");
  EXPECT_EQ(test::value_of(c, "checkpoint.tag_validation"), "\"Warn\"");
  EXPECT_EQ(test::value_of(c, "tensorboard.job_name"), "\"DeepSpeedJobName\"");
}

TEST(ZeroDynamicScaler, FallsBackToConstructorDefaultsWithoutScalerKeys) {
  const Config plain = test::load(R"({"train_batch_size": 8, "fp16": {"enabled": true}})");
  EXPECT_FALSE(plain.fp16.dynamic_args_given);
  const LossScalerArgs a = plain.fp16.zero_dynamic_scaler_args();
  EXPECT_EQ(a.init_scale, 4294967296.0);  // 2^32
  EXPECT_EQ(a.delayed_shift, 1);
  EXPECT_EQ(a.scale_window, 1000);
  EXPECT_EQ(a.min_scale, 1.0);

  const Config given = test::load(R"({"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale_window": 500}})");
  EXPECT_TRUE(given.fp16.dynamic_args_given);
  const LossScalerArgs b = given.fp16.zero_dynamic_scaler_args();
  EXPECT_EQ(b.init_scale, 65536.0);  // 2^16 from the default initial_scale_power
  EXPECT_EQ(b.scale_window, 500);
  EXPECT_EQ(b.delayed_shift, 2);
  EXPECT_EQ(given.fp16.hysteresis, 2);  // raw values kept

  // loss_scale is not one of the scaler keys.
  const Config static_scale = test::load(R"({"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 138}})");
  EXPECT_FALSE(static_scale.fp16.dynamic_args_given);
  EXPECT_FALSE(static_scale.fp16.dynamic_loss_scale());
}

}  // namespace
}  // namespace ds
