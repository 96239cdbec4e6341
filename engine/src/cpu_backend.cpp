#include "dice/engine/cpu_backend.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "dice/core/error.h"
#include "parallel.h"

namespace dice::engine {

namespace {

using std::size_t;

/// y[rows, out] = x[rows, in] * w[out, in]^T (Hugging Face's Linear without bias).
void linear(const std::vector<float>& x, std::int64_t rows, std::int64_t in,
            const std::vector<float>& w, std::int64_t out, std::vector<float>& y) {
  y.assign(static_cast<size_t>(rows * out), 0.0f);
  if (rows == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
              static_cast<blasint>(out), static_cast<blasint>(in), 1.0f, x.data(),
              static_cast<blasint>(in), w.data(), static_cast<blasint>(in), 0.0f, y.data(),
              static_cast<blasint>(out));
}

/// In place: x = x / sqrt(mean(x^2) + eps) * weight, over each of `count` vectors of `dim`.
void rms_norm(float* x, std::int64_t count, std::int64_t dim, const std::vector<float>& weight,
              double eps) {
  for (std::int64_t r = 0; r < count; ++r) {
    float* v = x + r * dim;
    double sum = 0;
    for (std::int64_t i = 0; i < dim; ++i) sum += static_cast<double>(v[i]) * v[i];
    const auto scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(dim) + eps));
    for (std::int64_t i = 0; i < dim; ++i) v[i] = weight[static_cast<size_t>(i)] * (v[i] * scale);
  }
}

/// In place NeoX rotate-half RoPE of one head vector at `position`: for i < d/2, (x_i, x_{i+d/2})
/// rotated by angle position * inv_freq_i, the angle rounded to fp32 as Hugging Face does.
void rope(float* x, std::int64_t position, const std::vector<float>& inv_freq) {
  const size_t half = inv_freq.size();
  const auto pos = static_cast<float>(position);
  for (size_t i = 0; i < half; ++i) {
    const float angle = pos * inv_freq[i];
    const auto c = static_cast<float>(std::cos(static_cast<double>(angle)));
    const auto s = static_cast<float>(std::sin(static_cast<double>(angle)));
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

void check_size(const std::vector<float>& t, std::int64_t expected, const std::string& name) {
  if (std::ssize(t) != expected)
    throw Error(fmt::format("CPU weights: {} has {} values, the config needs {}", name, t.size(),
                            expected));
}

}  // namespace

void CpuWeights::validate() const {
  const auto& c = config;
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 ||
      c.head_dim <= 0 || c.head_dim % 2 != 0 || c.intermediate_size <= 0 || c.vocab_size <= 0 ||
      c.num_heads % c.num_kv_heads != 0)
    throw Error(fmt::format(
        "CPU weights: config sizes out of range (hidden {}, layers {}, heads {}, kv heads {}, "
        "head_dim {}, intermediate {}, vocab {})",
        c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size,
        c.vocab_size));
  const std::int64_t h = c.hidden_size, q = c.num_heads * c.head_dim,
                     kv = c.num_kv_heads * c.head_dim, in = c.intermediate_size;
  check_size(embed_tokens, c.vocab_size * h, "model.embed_tokens.weight");
  check_size(norm, h, "model.norm.weight");
  if (!c.tie_word_embeddings) check_size(lm_head, c.vocab_size * h, "lm_head.weight");
  if (std::ssize(layers) != c.num_layers)
    throw Error(
        fmt::format("CPU weights: {} layers, the config needs {}", layers.size(), c.num_layers));
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    const std::string p = fmt::format("model.layers.{}.", i);
    check_size(l.input_layernorm, h, p + "input_layernorm.weight");
    check_size(l.q_proj, q * h, p + "self_attn.q_proj.weight");
    check_size(l.k_proj, kv * h, p + "self_attn.k_proj.weight");
    check_size(l.v_proj, kv * h, p + "self_attn.v_proj.weight");
    check_size(l.o_proj, h * q, p + "self_attn.o_proj.weight");
    check_size(l.q_norm, c.head_dim, p + "self_attn.q_norm.weight");
    check_size(l.k_norm, c.head_dim, p + "self_attn.k_norm.weight");
    check_size(l.post_attention_layernorm, h, p + "post_attention_layernorm.weight");
    check_size(l.gate_proj, in * h, p + "mlp.gate_proj.weight");
    check_size(l.up_proj, in * h, p + "mlp.up_proj.weight");
    check_size(l.down_proj, h * in, p + "mlp.down_proj.weight");
  }
}

CpuBackend::CpuBackend(CpuWeights weights, CpuBackendOptions options)
    : weights_(std::move(weights)) {
  weights_.validate();
  threads_ = options.threads > 0
                 ? options.threads
                 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  openblas_set_num_threads(threads_);
  // Hugging Face: inv_freq = 1 / (theta ** (arange(0, d, 2) / d)) in fp32.
  const std::int64_t d = weights_.config.head_dim;
  for (std::int64_t i = 0; i < d; i += 2) {
    const float exponent = static_cast<float>(i) / static_cast<float>(d);
    const auto power =
        static_cast<float>(std::pow(weights_.config.rope_theta, static_cast<double>(exponent)));
    inv_freq_.push_back(1.0f / power);
  }
}

void CpuBackend::open(SequenceId sequence, std::int32_t block_length) {
  if (block_length < 1)
    throw Error(
        fmt::format("CPU backend: sequence {}: block length {} < 1", sequence, block_length));
  if (caches_.contains(sequence))
    throw Error(fmt::format("CPU backend: sequence {} is already open", sequence));
  SequenceCache cache;
  cache.block_length = block_length;
  cache.k.resize(static_cast<size_t>(weights_.config.num_layers));
  cache.v.resize(static_cast<size_t>(weights_.config.num_layers));
  caches_.emplace(sequence, std::move(cache));
}

void CpuBackend::close(SequenceId sequence) {
  caches_.erase(sequence);
}

std::int64_t CpuBackend::cached_tokens(SequenceId sequence) const {
  const auto it = caches_.find(sequence);
  if (it == caches_.end())
    throw Error(fmt::format("CPU backend: sequence {} is not open", sequence));
  return it->second.length;
}

void CpuBackend::check(std::span<const ForwardItem> items) const {
  std::set<SequenceId> seen;
  for (const auto& item : items) {
    const auto it = caches_.find(item.sequence);
    if (it == caches_.end())
      throw Error(
          fmt::format("CPU backend: forward of sequence {}, which is not open", item.sequence));
    if (!seen.insert(item.sequence).second)
      throw Error(
          fmt::format("CPU backend: sequence {} appears twice in one forward", item.sequence));
    const std::int32_t b = it->second.block_length;
    if (std::ssize(item.commit) % b != 0)
      throw Error(fmt::format(
          "CPU backend: sequence {}: commit of {} tokens is not a whole number of blocks of {}",
          item.sequence, item.commit.size(), b));
    if (std::ssize(item.block) > b)
      throw Error(fmt::format("CPU backend: sequence {}: block of {} tokens is longer than {}",
                              item.sequence, item.block.size(), b));
    const std::int64_t start = it->second.length;
    const auto check_ids = [&](std::span<const std::int32_t> ids, std::int64_t first) {
      for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] < 0 || ids[i] >= weights_.config.vocab_size)
          throw InputError(fmt::format(
              "sequence {}: token id {} at position {} is outside the vocabulary [0, {})",
              item.sequence, ids[i], first + static_cast<std::int64_t>(i),
              weights_.config.vocab_size));
    };
    check_ids(item.commit, start);
    check_ids(item.block, start + std::ssize(item.commit));
  }
}

void CpuBackend::forward(std::span<const ForwardItem> items, const ForwardRequest& request,
                         ForwardOutput& out) {
  check(items);
  const auto& c = weights_.config;
  const std::int64_t hidden = c.hidden_size, hd = c.head_dim, heads = c.num_heads,
                     kv_heads = c.num_kv_heads, q_dim = heads * hd, kv_dim = kv_heads * hd,
                     group = heads / kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  // Rows of every item, in item order: commit rows then block rows.
  struct Span {
    SequenceCache* cache;
    std::int64_t first_row, commit, block, start;  // start: cached tokens before this forward
  };
  std::vector<Span> spans;
  std::int64_t rows = 0;
  for (const auto& item : items) {
    auto& cache = caches_.at(item.sequence);
    spans.push_back({&cache, rows, std::ssize(item.commit), std::ssize(item.block), cache.length});
    rows += std::ssize(item.commit) + std::ssize(item.block);
  }

  // Embedding.
  std::vector<float> x(static_cast<size_t>(rows * hidden));
  for (size_t i = 0; i < items.size(); ++i) {
    std::int64_t r = spans[i].first_row;
    for (const auto ids : {items[i].commit, items[i].block})
      for (const std::int32_t id : ids) {
        std::copy_n(weights_.embed_tokens.begin() + id * hidden, hidden,
                    x.begin() + (r++) * hidden);
      }
  }

  std::vector<float> h, q, k, v, attn, o, gate, up;
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    const auto& w = weights_.layers[static_cast<size_t>(layer)];
    h = x;
    rms_norm(h.data(), rows, hidden, w.input_layernorm, c.rms_norm_eps);
    linear(h, rows, hidden, w.q_proj, q_dim, q);
    linear(h, rows, hidden, w.k_proj, kv_dim, k);
    linear(h, rows, hidden, w.v_proj, kv_dim, v);
    rms_norm(q.data(), rows * heads, hd, w.q_norm, c.rms_norm_eps);
    rms_norm(k.data(), rows * kv_heads, hd, w.k_norm, c.rms_norm_eps);
    for (const auto& s : spans)
      for (std::int64_t r = 0; r < s.commit + s.block; ++r) {
        const std::int64_t row = s.first_row + r, position = s.start + r;
        for (std::int64_t hh = 0; hh < heads; ++hh)
          rope(q.data() + row * q_dim + hh * hd, position, inv_freq_);
        for (std::int64_t hh = 0; hh < kv_heads; ++hh)
          rope(k.data() + row * kv_dim + hh * hd, position, inv_freq_);
      }
    // Commit rows join the cache now; block rows stay in k/v.
    for (const auto& s : spans) {
      auto& ck = s.cache->k[static_cast<size_t>(layer)];
      auto& cv = s.cache->v[static_cast<size_t>(layer)];
      const auto from = static_cast<std::ptrdiff_t>(s.first_row * kv_dim);
      const auto to = static_cast<std::ptrdiff_t>((s.first_row + s.commit) * kv_dim);
      ck.insert(ck.end(), k.begin() + from, k.begin() + to);
      cv.insert(cv.end(), v.begin() + from, v.begin() + to);
    }

    // Attention, one task per (row, head).
    attn.assign(static_cast<size_t>(rows * q_dim), 0.0f);
    std::vector<std::pair<size_t, std::int64_t>> tasks;  // (span, row within span)
    for (size_t i = 0; i < spans.size(); ++i)
      for (std::int64_t r = 0; r < spans[i].commit + spans[i].block; ++r) tasks.emplace_back(i, r);
    detail::parallel_for(
        tasks.size() * static_cast<size_t>(heads), threads_, [&](size_t begin, size_t end) {
          std::vector<float> scores;
          for (size_t t = begin; t < end; ++t) {
            const auto [si, r] = tasks[t / static_cast<size_t>(heads)];
            const std::int64_t head = static_cast<std::int64_t>(t % static_cast<size_t>(heads));
            const Span& s = spans[si];
            const std::int64_t row = s.first_row + r, position = s.start + r;
            const std::int64_t b = s.cache->block_length;
            const float* qv = q.data() + row * q_dim + head * hd;
            const std::int64_t kvh = head / group;
            const auto& ck = s.cache->k[static_cast<size_t>(layer)];
            const auto& cv = s.cache->v[static_cast<size_t>(layer)];
            const std::int64_t cached = s.start + s.commit;  // cache rows now
            // Visible: cache rows up to the end of this row's block; block rows see all of
            // the cache and the whole block.
            const bool is_block = r >= s.commit;
            const std::int64_t visible_cache =
                is_block ? cached : std::min(cached, (position / b + 1) * b);
            const std::int64_t visible_block = is_block ? s.block : 0;
            scores.resize(static_cast<size_t>(visible_cache + visible_block));
            float max_score = -std::numeric_limits<float>::infinity();
            for (std::int64_t j = 0; j < visible_cache + visible_block; ++j) {
              const float* kv_row =
                  j < visible_cache
                      ? ck.data() + j * kv_dim + kvh * hd
                      : k.data() + (s.first_row + s.commit + (j - visible_cache)) * kv_dim +
                            kvh * hd;
              float dot = 0;
              for (std::int64_t d = 0; d < hd; ++d) dot += qv[d] * kv_row[d];
              scores[static_cast<size_t>(j)] = dot * scale;
              max_score = std::max(max_score, scores[static_cast<size_t>(j)]);
            }
            double denom = 0;
            for (auto& sc : scores) {
              sc = std::exp(sc - max_score);
              denom += sc;
            }
            float* ov = attn.data() + row * q_dim + head * hd;
            for (std::int64_t j = 0; j < visible_cache + visible_block; ++j) {
              const float p = static_cast<float>(scores[static_cast<size_t>(j)] / denom);
              const float* v_row =
                  j < visible_cache
                      ? cv.data() + j * kv_dim + kvh * hd
                      : v.data() + (s.first_row + s.commit + (j - visible_cache)) * kv_dim +
                            kvh * hd;
              for (std::int64_t d = 0; d < hd; ++d) ov[d] += p * v_row[d];
            }
          }
        });
    linear(attn, rows, q_dim, w.o_proj, hidden, o);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];

    h = x;
    rms_norm(h.data(), rows, hidden, w.post_attention_layernorm, c.rms_norm_eps);
    linear(h, rows, hidden, w.gate_proj, c.intermediate_size, gate);
    linear(h, rows, hidden, w.up_proj, c.intermediate_size, up);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = silu(gate[i]) * up[i];
    linear(gate, rows, c.intermediate_size, w.down_proj, hidden, o);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  }
  for (const auto& s : spans) s.cache->length += s.commit;

  // Final norm and lm_head over the block rows only; with masked_rows_only (and no logits
  // asked for), over the block rows that hold the mask token.
  const bool masked_only = request.skips_decided_rows();
  out.row_offsets.assign(1, 0);
  std::vector<float> block_x;
  struct LogitRow {
    size_t item;
    std::int64_t row;  ///< within the item's block
    size_t out;        ///< block row of the output
  };
  std::vector<LogitRow> logit_rows;
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    for (std::int64_t r = 0; r < s.block; ++r) {
      if (masked_only && items[i].block[static_cast<size_t>(r)] != items[i].sampling.mask_id)
        continue;
      const auto from = static_cast<std::ptrdiff_t>((s.first_row + s.commit + r) * hidden);
      block_x.insert(block_x.end(), x.begin() + from, x.begin() + from + hidden);
      logit_rows.push_back({i, r, out.row_offsets.back() + static_cast<size_t>(r)});
    }
    out.row_offsets.push_back(out.row_offsets.back() + static_cast<size_t>(s.block));
  }
  const auto logit_count = std::ssize(logit_rows);
  rms_norm(block_x.data(), logit_count, hidden, weights_.norm, c.rms_norm_eps);
  std::vector<float> logits;
  linear(block_x, logit_count, hidden,
         c.tie_word_embeddings ? weights_.embed_tokens : weights_.lm_head, c.vocab_size, logits);
  out.vocab_rows = c.vocab_size;

  out.proposals.clear();
  if (request.proposals) {
    out.proposals.resize(out.row_offsets.back());
    if (masked_only) propose_decided_rows(items, out.proposals);  // the rows without logits
    detail::parallel_for(logit_rows.size(), threads_, [&](size_t begin, size_t end) {
      for (size_t j = begin; j < end; ++j) {
        const LogitRow& lr = logit_rows[j];
        const std::span<const float> row(logits.data() + j * static_cast<size_t>(c.vocab_size),
                                         static_cast<size_t>(c.vocab_size));
        const std::int64_t position = spans[lr.item].start + spans[lr.item].commit + lr.row;
        out.proposals[lr.out] =
            propose(row, items[lr.item].sampling, position, items[lr.item].step);
      }
    });
  }
  if (request.logits)
    out.logits = std::move(logits);
  else
    out.logits.clear();
}

}  // namespace dice::engine
