// A randomised simulation (fixed seeds): thousands of add, cancel, step and
// finish events against a fake engine that samples random tokens and
// finishes sequences at random. After every Schedule() and Update() the
// scheduler's bookkeeping and the plan are checked against the fake engine's
// own record of every sequence.
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

struct SimulationParams {
  uint64_t seed = 1;
  int num_events = 3000;
  SchedulerConfig config;
};

// What the fake engine knows of a request, independently of the scheduler.
struct Truth {
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t max_new_tokens = 0;
  int64_t num_prompt_tokens = 0;
  int64_t num_computed = 0;  // per the plans seen so far
  int times_finished = 0;
};

class Simulation {
 public:
  explicit Simulation(const SimulationParams& params)
      : params_(params), rng_(params.seed) {
    auto scheduler = Scheduler::Create(params.config);
    EXPECT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = std::move(*scheduler);
  }

  void Run() {
    const SchedulerConfig& c = params_.config;
    const int64_t free_blocks = scheduler_->num_free_kv_blocks();
    const int64_t free_slots = scheduler_->num_free_state_slots();
    for (int event = 0; event < params_.num_events; ++event) {
      const int num_adds = Uniform(0, 2);
      for (int i = 0; i < num_adds; ++i) TryAdd();
      if (Chance(0.05)) CancelSomething();
      Step(/*cancel_in_flight=*/Chance(0.02));
      if (HasFatalFailure() || testing::Test::HasFailure()) return;
    }
    // Drain: no new requests; everything must finish in bounded steps.
    int drain_steps = 0;
    while (scheduler_->has_unfinished()) {
      Step(/*cancel_in_flight=*/false);
      if (testing::Test::HasFailure()) return;
      ASSERT_LT(++drain_steps, 100000) << "the scheduler stopped progressing";
    }
    auto plan = scheduler_->Schedule();  // reports the last cancellations
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->empty());
    RecordCancelled(*plan);

    EXPECT_EQ(scheduler_->num_sequences(), 0);
    EXPECT_EQ(scheduler_->num_running(), 0);
    EXPECT_EQ(scheduler_->num_waiting(), 0);
    EXPECT_EQ(scheduler_->num_free_kv_blocks(), free_blocks);
    EXPECT_EQ(scheduler_->num_free_kv_blocks(), c.num_kv_blocks);
    EXPECT_EQ(scheduler_->num_free_state_slots(), free_slots);
    EXPECT_EQ(scheduler_->num_free_state_slots(), c.num_state_slots);
    EXPECT_TRUE(scheduler_->CheckInvariants().ok());
    for (const auto& [id, truth] : truth_) {
      EXPECT_EQ(truth.times_finished, 1) << "request " << id;
    }
    // The simulation must have exercised the interesting paths.
    EXPECT_GT(num_accepted_, 500);
    EXPECT_GT(num_preemptions_, 0);
    EXPECT_GT(num_cancelled_, 0);
    EXPECT_GT(num_chunked_, 0);
  }

  int64_t num_preemptions() const { return num_preemptions_; }

 private:
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  static bool HasFatalFailure() { return testing::Test::HasFatalFailure(); }

  void TryAdd() {
    const SchedulerConfig& c = params_.config;
    SequenceRequest request;
    request.id = next_id_++;
    const int64_t max_prompt = c.max_sequence_tokens;
    request.prompt.resize(static_cast<size_t>(
        Chance(0.1) ? Uniform(1, static_cast<int>(max_prompt))
                    : Uniform(1, static_cast<int>(max_prompt / 4))));
    for (int32_t& t : request.prompt) t = Uniform(0, 1000);
    request.max_new_tokens = Uniform(1, static_cast<int>(max_prompt / 2));
    request.priority = Uniform(0, 2);
    const int64_t total =
        static_cast<int64_t>(request.prompt.size()) + request.max_new_tokens;
    const bool too_long =
        total > c.max_sequence_tokens ||
        (total + c.kv_block_size - 1) / c.kv_block_size > c.num_kv_blocks;
    const bool queue_full = scheduler_->num_waiting() >= c.max_waiting;
    Truth truth;
    truth.tokens = request.prompt;
    truth.max_new_tokens = request.max_new_tokens;
    truth.num_prompt_tokens = static_cast<int64_t>(request.prompt.size());
    const uint64_t id = request.id;
    const absl::Status status = scheduler_->Add(std::move(request));
    if (too_long) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    } else if (queue_full) {
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    } else {
      ASSERT_TRUE(status.ok()) << status;
      truth_[id] = std::move(truth);
      live_.insert(id);
      ++num_accepted_;
    }
  }

  void CancelSomething() {
    if (live_.empty() || Chance(0.1)) {
      // Unknown (or long gone) ids are NOT_FOUND.
      EXPECT_EQ(scheduler_->Cancel(next_id_ + 7).code(),
                absl::StatusCode::kNotFound);
      return;
    }
    auto it = live_.begin();
    std::advance(it, Uniform(0, static_cast<int>(live_.size()) - 1));
    Cancel(*it);
  }

  void Cancel(uint64_t id) {
    ASSERT_TRUE(scheduler_->Cancel(id).ok()) << id;
    live_.erase(id);
    cancelled_pending_.insert(id);
    truth_[id].num_computed = 0;
    ++num_cancelled_;
  }

  void RecordCancelled(const StepPlan& plan) {
    std::set<uint64_t> reported(plan.cancelled_ids.begin(),
                                plan.cancelled_ids.end());
    EXPECT_EQ(reported.size(), plan.cancelled_ids.size());
    EXPECT_EQ(reported, cancelled_pending_);
    for (uint64_t id : plan.cancelled_ids) ++truth_[id].times_finished;
    cancelled_pending_.clear();
  }

  void CheckPlan(const StepPlan& plan) {
    const SchedulerConfig& c = params_.config;
    EXPECT_LE(plan.num_tokens(), c.max_tokens_per_step);
    EXPECT_LE(scheduler_->num_running(), c.max_running_sequences);
    for (uint64_t id : plan.preempted_ids) {
      ASSERT_TRUE(live_.count(id));
      truth_[id].num_computed = 0;
      ++num_preemptions_;
    }
    std::set<int32_t> blocks_in_plan;
    std::set<int32_t> slots_in_plan;
    int64_t offset = 0;
    for (const ScheduledSequence& s : plan.sequences) {
      ASSERT_TRUE(live_.count(s.id)) << s.id;
      Truth& truth = truth_[s.id];
      const int64_t known = static_cast<int64_t>(truth.tokens.size());
      EXPECT_GE(s.num_tokens, 1);
      EXPECT_EQ(s.first_position, truth.num_computed) << s.id;
      EXPECT_LE(s.first_position + s.num_tokens, known);
      EXPECT_EQ(s.reset_state_slot, s.first_position == 0);
      EXPECT_EQ(s.samples_token(), s.first_position + s.num_tokens == known);
      if (s.is_decode) {
        EXPECT_EQ(s.num_tokens, 1);
      }
      if (!s.samples_token()) ++num_chunked_;
      EXPECT_EQ(static_cast<int64_t>(s.block_table.size()),
                (s.first_position + s.num_tokens + c.kv_block_size - 1) /
                    c.kv_block_size);
      for (int32_t b : s.block_table) {
        EXPECT_TRUE(blocks_in_plan.insert(b).second) << "block " << b;
      }
      EXPECT_TRUE(slots_in_plan.insert(s.state_slot).second);
      for (int64_t i = 0; i < s.num_tokens; ++i) {
        ASSERT_EQ(plan.token_ids[offset + i],
                  truth.tokens[s.first_position + i]);
      }
      offset += s.num_tokens;
    }
    EXPECT_EQ(offset, plan.num_tokens());
  }

  void Step(bool cancel_in_flight) {
    auto plan_or = scheduler_->Schedule();
    ASSERT_TRUE(plan_or.ok()) << plan_or.status();
    const StepPlan plan = std::move(*plan_or);
    ASSERT_TRUE(scheduler_->CheckInvariants().ok())
        << scheduler_->CheckInvariants();
    RecordCancelled(plan);
    CheckPlan(plan);
    if (plan.empty()) {
      // Nothing runs only when nothing can: no running sequence is left.
      EXPECT_EQ(scheduler_->num_running(), 0);
      EXPECT_EQ(scheduler_->num_waiting(), 0);
      return;
    }
    std::set<uint64_t> cancelled_now;
    if (cancel_in_flight) {
      const uint64_t id =
          plan.sequences[Uniform(0,
                                 static_cast<int>(plan.sequences.size()) - 1)]
              .id;
      Cancel(id);
      cancelled_now.insert(id);
    }
    StepResult result;
    for (const ScheduledSequence& s : plan.sequences) {
      Truth& truth = truth_[s.id];
      if (!cancelled_now.count(s.id)) truth.num_computed += s.num_tokens;
      SequenceOutput out;
      out.id = s.id;
      if (s.samples_token()) {
        out.has_token = true;
        out.token = Uniform(0, 1000);
        const int64_t generated = static_cast<int64_t>(truth.tokens.size()) -
                                  truth.num_prompt_tokens + 1;
        out.finished = generated >= truth.max_new_tokens || Chance(0.03);
      } else {
        out.finished = Chance(0.01);  // e.g. the engine failed it
        if (!out.finished && Chance(0.5)) continue;  // omitted is fine
      }
      if (!cancelled_now.count(s.id)) {
        if (out.has_token) truth.tokens.push_back(out.token);
        if (out.finished) {
          ++truth.times_finished;
          live_.erase(s.id);
        }
      }
      result.outputs.push_back(out);
    }
    ASSERT_TRUE(scheduler_->Update(result).ok());
    ASSERT_TRUE(scheduler_->CheckInvariants().ok())
        << scheduler_->CheckInvariants();
    for (uint64_t id : live_) {
      const Sequence* seq = scheduler_->FindSequence(id);
      ASSERT_NE(seq, nullptr);
      ASSERT_EQ(seq->tokens, truth_[id].tokens);
      ASSERT_EQ(seq->num_computed_tokens, truth_[id].num_computed);
    }
  }

  SimulationParams params_;
  std::mt19937_64 rng_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<uint64_t, Truth> truth_;  // every accepted request
  std::set<uint64_t> live_;          // accepted, not finished
  std::set<uint64_t> cancelled_pending_;
  uint64_t next_id_ = 1;
  int64_t num_accepted_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_cancelled_ = 0;
  int64_t num_chunked_ = 0;
};

SchedulerConfig Tight() {
  // Few blocks for the load: preemption is frequent.
  SchedulerConfig c;
  c.max_running_sequences = 8;
  c.max_tokens_per_step = 32;
  c.max_waiting = 16;
  c.num_kv_blocks = 24;
  c.kv_block_size = 4;
  c.num_state_slots = 6;
  c.max_sequence_tokens = 80;
  return c;
}

TEST(SchedulerSimulationTest, TightBlocks) {
  SimulationParams params;
  params.seed = 20240601;
  params.config = Tight();
  Simulation(params).Run();
}

TEST(SchedulerSimulationTest, BlockSizeOneAndSmallBudget) {
  SimulationParams params;
  params.seed = 7;
  params.config = Tight();
  params.config.kv_block_size = 1;
  params.config.num_kv_blocks = 70;
  params.config.max_sequence_tokens = 64;
  params.config.max_tokens_per_step = 9;
  params.config.num_state_slots = 12;
  params.config.max_running_sequences = 10;
  Simulation(params).Run();
}

TEST(SchedulerSimulationTest, LargeBlocksManySlots) {
  SimulationParams params;
  params.seed = 99;
  params.num_events = 4000;
  params.config = Tight();
  params.config.kv_block_size = 16;
  params.config.num_kv_blocks = 12;
  params.config.max_sequence_tokens = 120;
  params.config.max_tokens_per_step = 64;
  params.config.num_state_slots = 32;
  params.config.max_running_sequences = 32;
  params.config.max_waiting = 40;
  Simulation(params).Run();
}

}  // namespace
}  // namespace tributary
