# correct: hf llama decoder layer
# source: https://github.com/huggingface/transformers (src/transformers/models/llama/modeling_llama.py) (LlamaDecoderLayer)

class DecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, hidden_states, past_kv=None):
        residual = hidden_states
        hidden_states = self.attn_norm(hidden_states)
        hidden_states, present_key_value = self.attn(hidden_states, past_kv)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.ffn_norm(hidden_states)
        hidden_states = self.ffn(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states, present_key_value
