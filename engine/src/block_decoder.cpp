#include "dice/engine/block_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <utility>

#include "dice/core/error.h"

namespace dice::engine {

SequenceDecoder::SequenceDecoder(std::vector<std::int32_t> prompt, GenerationOptions options)
    : options_(std::move(options)), prompt_length_(std::ssize(prompt)), tokens_(std::move(prompt)) {
  options_.validate();
  masked_ = std::make_unique<bool[]>(static_cast<std::size_t>(options_.block_length));
  const std::int32_t mask = options_.sampling.mask_id;
  for (std::size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i] == mask)
      throw InputError(fmt::format(
          "prompt token {} is the mask id {}: a prompt may not contain masks", i, mask));
  const std::int64_t b = options_.block_length;
  const std::int64_t prefill = prompt_length_ / b * b;
  counts_.prefill_tokens = prefill;
  commit_end_ = prefill;
  settled_end_ = prompt_length_;
  if (options_.max_new_tokens == 0) {
    done_ = true;
    stop_reason_ = StopReason::kLength;
    return;
  }
  start_block(prefill);
}

void SequenceDecoder::start_block(std::int64_t start) {
  block_start_ = start;
  const std::int64_t end = start + options_.block_length;
  tokens_.resize(static_cast<std::size_t>(end), options_.sampling.mask_id);
  trace_.resize(static_cast<std::size_t>(end - prompt_length_));
  const auto masked = static_cast<std::int32_t>(end - std::max(start, prompt_length_));
  schedule_ = transfer_schedule(masked, options_.steps);
  step_ = 0;
}

bool SequenceDecoder::has_block() const {
  // Without a fused store, a finished block is committed by a forward of its own; a commit that
  // only recomputes a preempted cache rides with the block (as the fused store pass does), so
  // a preemption adds no forward.
  return options_.fused_store || commit_end_ == committed_ || commit_end_ <= recompute_end_;
}

ForwardItem SequenceDecoder::next_item(SequenceId sequence) const {
  if (done_) throw Error(fmt::format("sequence {}: next_item after the end", sequence));
  ForwardItem item;
  item.sequence = sequence;
  item.commit = std::span<const std::int32_t>(tokens_).subspan(
      static_cast<std::size_t>(committed_), static_cast<std::size_t>(commit_end_ - committed_));
  if (has_block())
    item.block = std::span<const std::int32_t>(tokens_).subspan(
        static_cast<std::size_t>(block_start_), static_cast<std::size_t>(options_.block_length));
  item.step = step_;
  item.sampling = options_.sampling;
  return item;
}

void SequenceDecoder::advance(std::span<const Proposal> proposals) {
  if (done_) throw Error("advance after the end of the sequence");
  const bool denoises = has_block();
  const std::size_t rows = denoises ? static_cast<std::size_t>(options_.block_length) : 0;
  if (proposals.size() != rows)
    throw Error(fmt::format("advance: expected {} proposals for the block rows, got {}", rows,
                            proposals.size()));
  ++counts_.forwards;
  if (!denoises) ++counts_.store_passes;
  // After a preemption, the tokens cached before it are written again: recomputed, not new.
  const std::int64_t redo_end = std::clamp(recompute_end_, committed_, commit_end_);
  counts_.recomputed_tokens += redo_end - committed_;
  counts_.committed_tokens += commit_end_ - redo_end;
  committed_ = commit_end_;
  if (denoises) denoise(proposals);
}

void SequenceDecoder::preempt() {
  if (done_) throw Error("preempt after the end of the sequence");
  ++counts_.preemptions;
  recompute_end_ = std::max(recompute_end_, committed_);
  committed_ = 0;
}

std::int64_t SequenceDecoder::next_cache_end() const {
  return commit_end_ + (has_block() ? options_.block_length : 0);
}

void SequenceDecoder::denoise(std::span<const Proposal> proposals) {
  const std::int32_t mask = options_.sampling.mask_id;
  const std::size_t b = static_cast<std::size_t>(options_.block_length);
  for (std::size_t i = 0; i < b; ++i)
    masked_[i] = tokens_[static_cast<std::size_t>(block_start_) + i] == mask;
  const std::span<const bool> masked(masked_.get(), b);
  const bool last = step_ + 1 >= options_.steps;
  select_unmask(options_.remasking, masked, proposals, schedule_[static_cast<std::size_t>(step_)],
                last, chosen_, order_);
  for (const std::int32_t i : chosen_) {
    const std::int64_t position = block_start_ + i;
    tokens_[static_cast<std::size_t>(position)] = proposals[static_cast<std::size_t>(i)].token;
    trace_[static_cast<std::size_t>(position - prompt_length_)] =
        TokenTrace{position / options_.block_length, step_, counts_.forwards - 1};
  }
  ++step_;
  ++counts_.denoising_steps;

  // Is the output decided? Scan the block's generated positions in order.
  const std::int64_t end = block_start_ + options_.block_length;
  for (std::int64_t q = std::max(block_start_, prompt_length_); q < end; ++q) {
    const std::int32_t token = tokens_[static_cast<std::size_t>(q)];
    if (token == mask) return;  // undecided: denoise again
    if (std::find(options_.stop_ids.begin(), options_.stop_ids.end(), token) !=
        options_.stop_ids.end())
      return finish(StopReason::kStopId, q);
    if (q - prompt_length_ + 1 >= options_.max_new_tokens) return finish(StopReason::kLength, q);
  }
  // The block is complete: the next forward commits it and starts the next block.
  ++counts_.blocks;
  settled_end_ = end;
  commit_end_ = end;
  start_block(end);
}

void SequenceDecoder::finish(StopReason reason, std::int64_t last_position) {
  ++counts_.blocks;
  done_ = true;
  stop_reason_ = reason;
  settled_end_ = last_position + 1;
  tokens_.resize(static_cast<std::size_t>(settled_end_));
  trace_.resize(static_cast<std::size_t>(settled_end_ - prompt_length_));
}

std::span<const std::int32_t> SequenceDecoder::settled_output() const {
  return std::span<const std::int32_t>(tokens_).subspan(
      static_cast<std::size_t>(prompt_length_),
      static_cast<std::size_t>(settled_end_ - prompt_length_));
}

GenerationResult SequenceDecoder::result() const {
  GenerationResult r;
  r.prompt_ids.assign(tokens_.begin(), tokens_.begin() + prompt_length_);
  const auto out = settled_output();
  r.output_ids.assign(out.begin(), out.end());
  r.trace.assign(trace_.begin(), trace_.begin() + std::ssize(out));
  r.stop_reason = stop_reason_;
  r.counts = counts_;
  return r;
}

std::int64_t cache_tokens_needed(const GenerationRequest& request) {
  const std::int64_t b = std::max<std::int32_t>(request.options.block_length, 1);
  const std::int64_t end = std::ssize(request.prompt_ids) + request.options.max_new_tokens;
  return (end + b - 1) / b * b;
}

namespace {

using Clock = std::chrono::steady_clock;

/// generate()'s batch: which requests run (in admission order), which wait (in request order),
/// how the KV cache is shared out (CacheAdmission), and the results as sequences finish.
class Batch {
 public:
  Batch(Backend& backend, std::span<const GenerationRequest> requests,
        const OutputCallback& on_output, const ScheduleOptions& schedule)
      : backend_(backend),
        requests_(requests),
        on_output_(on_output),
        schedule_(schedule),
        grow_(schedule.admission == CacheAdmission::kGrowAndPreempt &&
              backend.free_cache_pages().has_value()),
        results_(requests.size()),
        emitted_(requests.size(), 0),
        open_(requests.size(), false) {
    decoders_.reserve(requests.size());
    for (const auto& request : requests)
      decoders_.emplace_back(request.prompt_ids, request.options);
    for (std::size_t i = 0; i < requests.size(); ++i) waiting_.push_back(i);
  }

  /// Runs every request to its end; on an exception closes the sequences it opened first.
  std::vector<GenerationResult> run(ScheduleStats& stats) {
    try {
      admit();
      std::vector<ForwardItem> items;
      ForwardOutput out;
      while (!active_.empty()) {
        if (grow_) make_room();
        items.clear();
        for (const std::size_t i : active_) items.push_back(decoders_[i].next_item(id_of(i)));
        stats.peak_active = std::max(stats.peak_active, active_.size());
        ++stats.forwards;
        backend_.forward(items, ForwardRequest{.masked_rows_only = true}, out);
        std::vector<std::size_t> still;
        for (std::size_t j = 0; j < active_.size(); ++j) {
          const std::size_t i = active_[j];
          decoders_[i].advance(
              std::span<const Proposal>(out.proposals)
                  .subspan(out.row_offsets[j], out.row_offsets[j + 1] - out.row_offsets[j]));
          if (decoders_[i].done()) {
            finish(i);
          } else {
            emit(i);
            still.push_back(i);
          }
        }
        active_ = std::move(still);
        admit();
      }
    } catch (...) {
      for (std::size_t i = 0; i < open_.size(); ++i)
        if (open_[i]) backend_.close(id_of(i));
      throw;
    }
    return std::move(results_);
  }

 private:
  SequenceId id_of(std::size_t i) const { return schedule_.first_id + static_cast<SequenceId>(i); }

  void emit(std::size_t i) {
    const auto settled = decoders_[i].settled_output();
    if (settled.size() > emitted_[i] && on_output_) on_output_(i, settled.subspan(emitted_[i]));
    emitted_[i] = settled.size();
  }

  void finish(std::size_t i) {
    emit(i);
    results_[i] = decoders_[i].result();
    results_[i].seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    if (open_[i]) backend_.close(id_of(i));
    open_[i] = false;
  }

  void open(std::size_t i) {
    backend_.open(id_of(i), decoders_[i].options().block_length);
    open_[i] = true;
  }

  /// Pages sequence i takes beyond those it holds to run its next forward and, with `after`,
  /// the forward after that too (at most a block more).
  std::int64_t pages_for(std::size_t i, bool after) const {
    const std::int64_t end =
        decoders_[i].next_cache_end() + (after ? decoders_[i].options().block_length : 0);
    return backend_.cache_pages_to_hold(id_of(i), end);
  }

  std::int64_t pages_for_active(bool after) const {
    std::int64_t pages = 0;
    for (const std::size_t i : active_) pages += pages_for(i, after);
    return pages;
  }

  std::int64_t free_pages() const { return backend_.free_cache_pages().value_or(0); }

  InputError cannot_fit(std::size_t i, std::int64_t need) const {
    const auto limit = backend_.cache_limit_tokens();
    return InputError(fmt::format(
        "request {}: its KV cache needs {} positions (prompt {} + max_new_tokens {}, in blocks "
        "of {}), more than the backend's cache holds ({} positions); lower max_new_tokens or "
        "give the backend more memory",
        i, need, requests_[i].prompt_ids.size(), requests_[i].options.max_new_tokens,
        requests_[i].options.block_length, limit ? *limit : -1));
  }

  Error held_elsewhere(std::size_t i, std::int64_t pages) const {
    return Error(fmt::format(
        "request {}: its next forward needs {} KV cache pages and {} are free, with no other "
        "sequence of this generation running: other sequences of the backend hold the rest",
        i, pages, free_pages()));
  }

  /// Admits waiting requests in order while their caches fit (and fewer than max_active run).
  ///
  /// With growing caches, a request joins when its first two forwards fit beside the running
  /// sequences' next two. After a preemption the head of the queue is the preempted sequence,
  /// and its rejoining prefill needs more pages than its preemption freed, so nothing joins
  /// until a finished sequence frees room (no admission flag is needed for that).
  void admit() {
    if (waiting_.empty()) return;  // (the common case: nothing to count pages for)
    std::int64_t pending = grow_ ? pages_for_active(true) : 0;
    while (!waiting_.empty() &&
           (schedule_.max_active == 0 || active_.size() < schedule_.max_active)) {
      const std::size_t i = waiting_.front();
      if (decoders_[i].done()) {
        finish(i);
        waiting_.pop_front();
        continue;
      }
      const std::int64_t need = cache_tokens_needed(requests_[i]);
      if (grow_) {
        const auto limit = backend_.cache_limit_tokens();
        if (limit && need > *limit) {
          if (!active_.empty()) return;  // the error once nothing else runs, as below
          throw cannot_fit(i, need);
        }
        const std::int64_t two = pages_for(i, true);
        if (pending + two > free_pages()) {
          if (!active_.empty()) return;  // waits for a running sequence to finish
          const std::int64_t one = pages_for(i, false);
          if (one > free_pages()) throw held_elsewhere(i, one);
        }
        pending += two;
        open(i);
      } else {
        if (!backend_.can_reserve(need)) {
          if (!active_.empty()) return;  // waits for a running sequence to finish
          throw cannot_fit(i, need);
        }
        open(i);
        backend_.reserve(id_of(i), need);
      }
      active_.push_back(i);
      waiting_.pop_front();
    }
  }

  /// Preempts the most recently admitted sequences until the next forward fits; they go back
  /// into the queue in request order.
  void make_room() {
    std::int64_t need = pages_for_active(false);  // less each victim's own, as it goes
    while (need > free_pages()) {
      if (active_.size() == 1) throw held_elsewhere(active_.front(), need);
      const std::size_t i = active_.back();
      need -= pages_for(i, false);
      active_.pop_back();
      backend_.close(id_of(i));
      open_[i] = false;
      decoders_[i].preempt();
      waiting_.insert(std::lower_bound(waiting_.begin(), waiting_.end(), i), i);
    }
  }

  Backend& backend_;
  std::span<const GenerationRequest> requests_;
  const OutputCallback& on_output_;
  const ScheduleOptions& schedule_;
  const bool grow_;  ///< kGrowAndPreempt on a backend that counts pages
  const Clock::time_point start_ = Clock::now();
  std::vector<SequenceDecoder> decoders_;
  std::vector<GenerationResult> results_;
  std::vector<std::size_t> emitted_;  ///< settled tokens passed to on_output_
  std::vector<bool> open_;            ///< open on the backend
  std::vector<std::size_t> active_;   ///< running, in admission order
  std::deque<std::size_t> waiting_;   ///< in request order (preempted ones go back in order)
};

}  // namespace

std::vector<GenerationResult> generate(Backend& backend,
                                       std::span<const GenerationRequest> requests,
                                       const OutputCallback& on_output,
                                       const ScheduleOptions& schedule, ScheduleStats* stats) {
  // Ids the decoding itself writes or looks for must be ids of the backend's model (a model with
  // a small vocabulary needs its own mask id: the default is SDAR's).
  const std::int64_t vocab = backend.vocab_rows();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const GenerationOptions& o = requests[i].options;
    if (o.sampling.mask_id < 0 || o.sampling.mask_id >= vocab)
      throw InputError(fmt::format(
          "request {}: option mask_id {} is outside the model's vocabulary [0, {}); take it "
          "from the model config's mask_token_id",
          i, o.sampling.mask_id, vocab));
    for (const std::int32_t id : o.stop_ids)
      if (id < 0 || id >= vocab)
        throw InputError(fmt::format(
            "request {}: option stop_ids holds {}, outside the model's vocabulary [0, {})", i, id,
            vocab));
  }
  ScheduleStats local_stats;
  ScheduleStats& st = stats != nullptr ? *stats : local_stats;
  st = ScheduleStats{};
  auto results = Batch(backend, requests, on_output, schedule).run(st);
  for (const auto& r : results) {  // the per-sequence counts are the record
    st.preemptions += r.counts.preemptions;
    st.recomputed_tokens += r.counts.recomputed_tokens;
  }
  return results;
}

}  // namespace dice::engine
