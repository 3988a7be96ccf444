// render_chat against Jinja renderings of each format's template (fixtures/tokenizer_goldens.json
// "chat": ChatML is SmolLM2's own template through transformers' apply_chat_template; Llama 3 is
// Meta-Llama-3-8B-Instruct's template; Falcon is the falcon-180B-chat format as a template).
#define BOOST_TEST_MODULE model_tokenizer_chat_template
#include "model/tokenizer/chat_template.hpp"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "tests/model/tokenizer/tokenizer_fixtures.hpp"

namespace data = boost::unit_test::data;
using namespace actorlm::model;
using namespace actorlm::model::test;

namespace {

// The conversations of tools/models/make_tokenizer_fixtures.py.
const std::map<std::string, std::vector<ChatMessage>> kConversations = {
    {"with_system",
     {{"system", "You are a terse assistant."},
      {"user", "What is the capital of France?"},
      {"assistant", "Paris."}}},
    {"without_system",
     {{"user", "Hi there!"},
      {"assistant", "Hello! How can I help?"},
      {"user", "Tell me a joke about 2 + 2 = 4.\nKeep it short."}}},
    {"with_tool",
     {{"user", "  Weather in Paris?  "},
      {"assistant", "{\"call\": \"weather\", \"city\": \"Paris\"}"},
      {"tool", "\t18 C, sunny\n"}}},
};

ChatFormat format_named(const std::string& name) {
  if (name == "chatml") return ChatFormat::chatml;
  if (name == "llama3") return ChatFormat::llama3;
  if (name == "falcon") return ChatFormat::falcon;
  throw std::invalid_argument(name);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_hf_goldens_load) {
  BOOST_TEST_REQUIRE(goldens().error == "");
  BOOST_TEST(goldens().chat.size() == 3u * kConversations.size() * 2u);
}

BOOST_DATA_TEST_CASE(renders_each_conversation_as_the_jinja_template_does,
                     data::make(indices(goldens().chat.size())), index) {
  const ChatGolden& g = goldens().chat[index];
  BOOST_TEST_CONTEXT(g.format << " " << g.conversation
                              << (g.add_generation_prompt ? " +prompt" : "")) {
    // Only SmolLM2's ChatML template adds a system message of its own.
    const std::string default_system = g.format == "chatml" ? goldens().default_system : "";
    BOOST_TEST(render_chat(format_named(g.format), kConversations.at(g.conversation),
                           {g.add_generation_prompt}, default_system) == g.text);
  }
}

BOOST_AUTO_TEST_CASE(chatml_without_a_default_system_message_adds_none) {
  const std::string text = render_chat(ChatFormat::chatml, {{"user", "hi"}}, {true});
  BOOST_TEST(text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

BOOST_AUTO_TEST_CASE(an_empty_conversation_is_just_the_generation_prompt) {
  BOOST_TEST(render_chat(ChatFormat::chatml, {}, {true}, "sys") == "<|im_start|>assistant\n");
  BOOST_TEST(render_chat(ChatFormat::llama3, {}, {false}) == "");
}

BOOST_AUTO_TEST_CASE(the_smollm2_template_gives_its_default_system_message) {
  BOOST_TEST(default_system_message(smollm2_vocabulary().chat_template) ==
             goldens().default_system);
  // Qwen2.5 writes its newline escaped inside a Jinja string.
  BOOST_TEST(
      default_system_message(
          "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud.<|im_end|>\\n' }}") ==
      "You are Qwen, created by Alibaba Cloud.");
  // A system message taken from the conversation is no default.
  BOOST_TEST(default_system_message(
                 "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>' }}") == "");
  BOOST_TEST(default_system_message("") == "");
}

BOOST_AUTO_TEST_CASE(selects_the_format_from_the_template_then_the_architecture) {
  BOOST_TEST(
      (select_chat_format(smollm2_vocabulary().chat_template, "llama") == ChatFormat::chatml));
  BOOST_TEST(
      (select_chat_format("{{ '<|start_header_id|>' + role }}", "llama") == ChatFormat::llama3));
  BOOST_TEST((select_chat_format("", "falcon") == ChatFormat::falcon));
  BOOST_TEST((select_chat_format("", "llama") == ChatFormat::chatml));
  BOOST_TEST((select_chat_format("<|im_start|>", "falcon") == ChatFormat::chatml));
}

BOOST_AUTO_TEST_CASE(a_rendered_chatml_prompt_encodes_its_markers_as_special_tokens) {
  const std::string text = render_chat(ChatFormat::chatml, kConversations.at("with_system"), {true});
  const auto ids = smollm2().encode(text, true);
  BOOST_TEST(std::count(ids.begin(), ids.end(), 1) == 4);  // <|im_start|> x 3 + prompt
  BOOST_TEST(std::count(ids.begin(), ids.end(), 2) == 3);  // <|im_end|>
  BOOST_TEST(smollm2().decode(ids) == text);
}

BOOST_AUTO_TEST_CASE(continue_final_message_leaves_the_last_message_open_in_each_format) {
  const std::vector<ChatMessage> m = {{"user", "Capital of France?"}, {"assistant", " The capital is "}};
  const ChatOptions open{false, true};
  BOOST_TEST(render_chat(ChatFormat::chatml, m, open) ==
             "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n The capital is ");
  BOOST_TEST(render_chat(ChatFormat::llama3, m, open) ==
             "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nCapital of France?<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\nThe capital is");
  BOOST_TEST(render_chat(ChatFormat::falcon, m, open) == "User: Capital of France?\nFalcon:  The capital is ");
  // The closed rendering is the open one plus the end of turn (what HF cuts off).
  BOOST_TEST(render_chat(ChatFormat::chatml, m, {false}) ==
             render_chat(ChatFormat::chatml, m, open) + "<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(without_add_generation_prompt_no_assistant_turn_is_opened) {
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  BOOST_TEST(render_chat(ChatFormat::chatml, m, {false}) == "<|im_start|>user\nhi<|im_end|>\n");
  BOOST_TEST(render_chat(ChatFormat::chatml, m, {true}) ==
             render_chat(ChatFormat::chatml, m, {false}) + "<|im_start|>assistant\n");
  // continue_final_message takes precedence: the last message stays open, no new turn.
  BOOST_TEST(render_chat(ChatFormat::chatml, m, {true, true}) == "<|im_start|>user\nhi");
}
