// CpuWeights::from_checkpoint: the checkpoint's tensors widened to fp32.

#include <fmt/format.h>

#include "dice/engine/cpu_backend.h"
#include "dice/model/checkpoint.h"

namespace dice::engine {

CpuWeights CpuWeights::from_checkpoint(const model::Checkpoint& checkpoint) {
  CpuWeights w;
  w.config = checkpoint.config();
  const auto get = [&](const std::string& name) { return checkpoint.tensor(name).to_f32(); };
  w.embed_tokens = get("model.embed_tokens.weight");
  for (std::int64_t i = 0; i < w.config.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    CpuLayerWeights l;
    l.input_layernorm = get(p + "input_layernorm.weight");
    l.q_proj = get(p + "self_attn.q_proj.weight");
    l.k_proj = get(p + "self_attn.k_proj.weight");
    l.v_proj = get(p + "self_attn.v_proj.weight");
    l.o_proj = get(p + "self_attn.o_proj.weight");
    l.q_norm = get(p + "self_attn.q_norm.weight");
    l.k_norm = get(p + "self_attn.k_norm.weight");
    l.post_attention_layernorm = get(p + "post_attention_layernorm.weight");
    l.gate_proj = get(p + "mlp.gate_proj.weight");
    l.up_proj = get(p + "mlp.up_proj.weight");
    l.down_proj = get(p + "mlp.down_proj.weight");
    w.layers.push_back(std::move(l));
  }
  w.norm = get("model.norm.weight");
  if (!w.config.tie_word_embeddings) w.lm_head = get("lm_head.weight");
  w.validate();
  return w;
}

}  // namespace dice::engine
