#include "actors/cluster/rendezvous_store.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <map>
#include <stdexcept>

namespace actorlm::cluster {

namespace {

struct StoreState {
  std::map<std::string, std::vector<char>> values;
  std::multimap<std::string, caf::typed_response_promise<std::vector<char>>> waiting;
  static inline const char* name = "rendezvous_store";
};

store_actor::behavior_type store_fn(store_actor::stateful_pointer<StoreState> self, int /*unused*/) {
  return {
      [self](store_set_atom, const std::string& key, std::vector<char>& value) {
        auto& st = self->state;
        auto [first, last] = st.waiting.equal_range(key);
        for (auto it = first; it != last; ++it) it->second.deliver(value);
        st.waiting.erase(first, last);
        st.values[key] = std::move(value);
        return true;
      },
      [self](store_get_atom, const std::string& key) -> caf::result<std::vector<char>> {
        auto& st = self->state;
        if (auto it = st.values.find(key); it != st.values.end()) return it->second;
        auto rp = self->make_response_promise<std::vector<char>>();
        st.waiting.emplace(key, rp);
        return rp;
      },
  };
}

class RemoteStore : public kernels::RendezvousStore {
 public:
  RemoteStore(caf::actor_system& sys, store_actor store) : sys_(sys), store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<char>& value) override {
    caf::scoped_actor self{sys_};
    self->request(store_, std::chrono::seconds(30), store_set_atom::value, key, value)
        .receive([](bool) {},
                 [&](caf::error& e) {
                   throw std::runtime_error("the head's rendezvous store did not take key '" + key +
                                            "': " + sys_.render(e));
                 });
  }

  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::vector<char> out;
    caf::scoped_actor self{sys_};
    // A finite request timeout stays in CAF 0.17's clock until it expires; joins are rare.
    self->request(store_, timeout, store_get_atom::value, key)
        .receive([&](std::vector<char>& v) { out = std::move(v); },
                 [&](caf::error& e) {
                   throw std::runtime_error("the head's rendezvous store has no key '" + key + "' after " +
                                            std::to_string(timeout.count()) + " ms: " + sys_.render(e));
                 });
    return out;
  }

 private:
  caf::actor_system& sys_;
  store_actor store_;
};

}  // namespace

store_actor spawn_rendezvous_store(caf::actor_system& sys) { return sys.spawn(store_fn, 0); }

std::shared_ptr<kernels::RendezvousStore> remote_store(caf::actor_system& sys, store_actor store) {
  return std::make_shared<RemoteStore>(sys, std::move(store));
}

}  // namespace actorlm::cluster
