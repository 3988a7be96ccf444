#pragma once
// Chat prompt formats: the model's Jinja chat template is not executed; it selects one of the
// formats below (or the architecture does), rendered here in C++:
//   chatml  "<|im_start|>{role}\n{content}<|im_end|>\n" per message; prompt
//           "<|im_start|>assistant\n" (SmolLM2-Instruct's tokenizer_config.json template).
//   llama3  "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>" per message,
//           content with ASCII whitespace trimmed, "<|begin_of_text|>" before the first; prompt
//           "<|start_header_id|>assistant<|end_header_id|>\n\n" (Meta-Llama-3-8B-Instruct's
//           template). The text holds the BOS token, so the caller must not add another.
//   falcon  "System: ...", "User: ...", "Falcon: ..." lines joined by "\n"; prompt "\nFalcon:"
//           (the chat format of tiiuae/falcon-180B-chat's model card; the Falcon-Instruct
//           models were tuned on the same "User:"/"Falcon:" turns). Other roles are written
//           with their name capitalised ("Tool: ...").

#include <string>
#include <string_view>
#include <vector>

namespace actorlm::model {

enum class ChatFormat { chatml, llama3, falcon };

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

// From the template source (tokenizer.chat_template / tokenizer_config.json), else from the
// architecture name ("llama" -> llama3 only when the template says so; "falcon" -> falcon).
// Contains "<|im_start|>" -> chatml; "<|start_header_id|>" -> llama3; otherwise the
// architecture: "falcon" -> falcon, anything else -> chatml.
ChatFormat select_chat_format(std::string_view template_source, std::string_view architecture);

// The system message a ChatML template writes when the conversation has none: the literal text
// between "<|im_start|>system" + newline (written out or as "\n") and "<|im_end|>", when it
// holds no Jinja ("{", "}", quotes); empty otherwise. SmolLM2's gives "You are a helpful AI
// assistant named SmolLM, trained by Hugging Face".
std::string default_system_message(std::string_view template_source);

// The switches HF's apply_chat_template (and vLLM's chat API) gives a template.
struct ChatOptions {
  bool add_generation_prompt = true;    // the assistant's turn opened after the messages
  bool continue_final_message = false;  // the last message left open, without its end of turn,
                                        // for the model to continue it ("prefill"); HF renders
                                        // the template and cuts the text after that message's
                                        // content (llama3: trimmed). add_generation_prompt is
                                        // then ignored (HF and vLLM refuse both).
};

// The prompt text (special tokens written out, to be encoded with parse_special = true).
// `default_system`: when not empty, used as a system message in front when the first message is
// not a system message (SmolLM2's ChatML template does this; see default_system_message).
// llama3 puts "<|begin_of_text|>" before the first message only: no messages, no BOS.
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages, ChatOptions options,
                        std::string_view default_system = {});

}  // namespace actorlm::model
