"""The inputs every verification feeds in, made from fixed seeds (no download).

- ``tiny.py``: a tiny random Llama, its WordLevel tokenizer and the verify plan's prompts;
- ``chat.py``: a chat-template tokenizer for the tiny models and ShareGPT-style conversations;
- ``families.py``: tiny seeded models of the families users extract from (Llama, Qwen3,
  Qwen3-MoE, DeepSeek-V3), shared by the CPU and the GPU sessions.
"""

__all__: list[str] = []
