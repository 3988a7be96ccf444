#include "model/tokenizer/chat_template.hpp"

namespace actorlm::model {

namespace {

std::string_view trim_ascii_space(std::string_view s) {
  constexpr std::string_view space = " \t\n\r\f\v";
  const auto first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

std::string falcon_speaker(std::string_view role) {
  if (role == "user") return "User";
  if (role == "assistant") return "Falcon";
  if (role == "system") return "System";
  std::string name(role);
  if (!name.empty() && name[0] >= 'a' && name[0] <= 'z')
    name[0] = static_cast<char>(name[0] - 'a' + 'A');
  return name;
}

// `open`: without the end of turn (continue_final_message).
void render_message(ChatFormat format, const ChatMessage& m, bool first, bool open, std::string& out) {
  switch (format) {
    case ChatFormat::chatml:
      out += "<|im_start|>" + m.role + "\n" + m.content;
      if (!open) out += "<|im_end|>\n";
      return;
    case ChatFormat::llama3:
      if (first) out += "<|begin_of_text|>";
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
      out += trim_ascii_space(m.content);
      if (!open) out += "<|eot_id|>";
      return;
    case ChatFormat::falcon:
      if (!first) out += "\n";
      out += falcon_speaker(m.role) + ": " + m.content;
      return;
  }
}

std::string_view generation_prompt(ChatFormat format) {
  switch (format) {
    case ChatFormat::chatml:
      return "<|im_start|>assistant\n";
    case ChatFormat::llama3:
      return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFormat::falcon:
      return "\nFalcon:";
  }
  return {};
}

}  // namespace

ChatFormat select_chat_format(std::string_view template_source, std::string_view architecture) {
  if (template_source.find("<|im_start|>") != std::string_view::npos) return ChatFormat::chatml;
  if (template_source.find("<|start_header_id|>") != std::string_view::npos)
    return ChatFormat::llama3;
  if (architecture == "falcon") return ChatFormat::falcon;
  return ChatFormat::chatml;
}

std::string default_system_message(std::string_view source) {
  constexpr std::string_view opener = "<|im_start|>system";
  constexpr std::string_view closer = "<|im_end|>";
  for (auto at = source.find(opener); at != std::string_view::npos;
       at = source.find(opener, at + 1)) {
    std::string_view rest = source.substr(at + opener.size());
    if (rest.starts_with("\n"))
      rest.remove_prefix(1);
    else if (rest.starts_with("\\n"))
      rest.remove_prefix(2);
    else
      continue;  // "<|im_start|>system' + ..." : the message comes from the conversation
    const auto end = rest.find(closer);
    if (end == std::string_view::npos) continue;
    const std::string_view text = rest.substr(0, end);
    if (text.empty() || text.find_first_of("{}'\"") != std::string_view::npos) continue;
    return std::string(text);
  }
  return {};
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages, ChatOptions options,
                        std::string_view default_system) {
  std::string out;
  bool first = true;
  if (!default_system.empty() && !messages.empty() && messages.front().role != "system") {
    render_message(format, {"system", std::string(default_system)}, first, false, out);
    first = false;
  }
  const bool open_last = options.continue_final_message && !messages.empty();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    render_message(format, messages[i], first, open_last && i + 1 == messages.size(), out);
    first = false;
  }
  if (options.add_generation_prompt && !open_last) out += generation_prompt(format);
  return out;
}

}  // namespace actorlm::model
