// A byte-level tokenizer whose vocabulary is exactly the 256 byte values, id = byte: the goldens'
// vocabulary size is 256, so every text encodes to ids the golden models accept and every id sequence
// decodes (the UTF-8 of a CJK character or an emoji takes several ids). The chat template is a small
// ChatML-like one with Hermes-style tools (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`),
// rendered as plain bytes: no id is special, so nothing about the models' vocabulary changes.

/** GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for U+0100 onwards. */
function byteChars(): string[] {
  const printable = (b: number): boolean => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const out: string[] = [];
  let next = 0x100;
  for (let b = 0; b < 256; b++) out.push(String.fromCodePoint(printable(b) ? b : next++));
  return out;
}

/** tokenizer.json: BPE without merges over the 256 byte characters, ByteLevel without its regex. */
export function byteTokenizerJson(): object {
  const vocab: Record<string, number> = {};
  byteChars().forEach((c, id) => (vocab[c] = id));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
}

/** The template of byteTokenizerConfig: ChatML-like turns, tools as JSON lines in the system turn. */
export const BYTE_CHAT_TEMPLATE = [
  // No whitespace control: the library trims the newline after a block tag (trim_blocks), and every
  // newline here stands before one, so the output is exactly the text between the tags.
  '{% if tools %}<|system|>\n',
  '{% if messages and messages[0].role == "system" %}{{ messages[0].content }}\n\n{% endif %}',
  'You may call functions. Their signatures:\n<tools>\n',
  '{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}',
  '</tools>\nFor each call reply with <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>\n',
  '{% elif messages and messages[0].role == "system" %}<|system|>\n{{ messages[0].content }}\n{% endif %}',
  '{% for message in messages %}',
  '{% if message.role == "system" %}',
  '{% if not loop.first %}{{ raise_exception("a system message must come first") }}{% endif %}',
  '{% elif message.role == "user" %}<|user|>\n{{ message.content }}\n',
  '{% elif message.role == "assistant" %}<|assistant|>\n{% if message.content %}{{ message.content }}{% endif %}',
  '{% if message.tool_calls %}{% for call in message.tool_calls %}',
  '<tool_call>{"name": "{{ call.function.name }}", "arguments": ',
  '{% if call.function.arguments is string %}{{ call.function.arguments }}{% else %}{{ call.function.arguments | tojson }}{% endif %}',
  '}</tool_call>{% endfor %}{% endif %}{{ eos_token }}\n',
  '{% elif message.role == "tool" %}<|tool|>\n<tool_response>{{ message.content }}</tool_response>\n',
  '{% else %}{{ raise_exception("unknown role " + message.role) }}',
  '{% endif %}',
  '{% endfor %}',
  '{% if add_generation_prompt %}<|assistant|>\n{% endif %}',
].join('');

/** tokenizer_config.json: eos/bos as text (plain bytes here), the chat template above. */
export function byteTokenizerConfig(): object {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: '<s>',
    eos_token: '</s>',
    pad_token: null,
    unk_token: null,
    add_bos_token: false,
    add_eos_token: false,
    clean_up_tokenization_spaces: false,
    model_max_length: 4096,
    chat_template: BYTE_CHAT_TEMPLATE,
  };
}
