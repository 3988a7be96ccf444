#pragma once
// The link between one I/O thread of the HTTP server and the engine. Each I/O thread owns one
// bridge, and the bridge owns one CAF actor: the token sink of every request that thread
// serves. The scheduler sends a sink at most one SinkBatch per step, so one step costs the I/O
// thread one wake (one handler posted to its event loop) however many of its streams ran,
// never one per token. The actor is a CAF actor companion: what it is sent is posted straight
// from the sender's thread to the I/O thread, which runs its handlers. Submissions go out as
// its requests, aborts as messages, both from the I/O thread and asynchronously: an I/O thread
// never blocks on the engine.
//
// Threading: every member function is called on the bridge's I/O thread, and every callback
// (Listener::deliver, the submit callback) runs there. No CAF header here.

#include "actors/scheduler/request.hpp"
#include "actors/scheduler/scheduler.hpp"

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace caf { class actor_system; }
namespace boost::asio { class io_context; }
namespace actorlm::engine { class Engine; }

namespace actorlm::http {

// What arrived for one listener since its last delivery.
struct ChannelBatch {
  std::vector<scheduler::TokenEvent> tokens;
  std::vector<scheduler::FinishEvent> finished;
  std::string error;    // what failed, when some of `finished` are FinishReason::error
  std::string failure;  // the engine stopped: nothing more will come
};

// Whoever waits for the events of some engine requests (one API call).
class Listener {
 public:
  virtual ~Listener() = default;
  virtual void deliver(ChannelBatch&&) = 0;
};

struct SubmitOutcome {
  std::vector<scheduler::SubmitStatus> status;  // one per spec, in order
  std::string reason;                           // why the engine is unavailable, when it is
};

class EngineBridge {
 public:
  // Destroy it on its I/O thread, or after that thread's event loop has stopped.
  EngineBridge(caf::actor_system&, engine::Engine&, boost::asio::io_context&);
  ~EngineBridge();  // stops the sink actor
  // From now on the sink actor posts nothing to the I/O thread (call before its io_context goes;
  // abort and forget still work; the destructor calls it).
  void detach();
  EngineBridge(const EngineBridge&) = delete;
  EngineBridge& operator=(const EngineBridge&) = delete;

  // Registers `listener` for the specs' ids, then submits them in order. `done` runs when the
  // engine has answered every one (at once, inside this call, for no specs or when the sink
  // actor has ended: then every status is unavailable). A listener removed (forget) before then
  // is not called: the bridge aborts whatever the engine accepted, so that nothing runs for
  // nobody.
  void submit(std::vector<scheduler::RequestSpec>, Listener*, std::function<void(SubmitOutcome)> done);
  // Aborts an engine request (fire and forget; its finish events still reach its listener).
  void abort(scheduler::RequestId);
  // Stops delivering events of `id` to anybody. Events for unknown ids are dropped.
  void forget(scheduler::RequestId);
  std::size_t listeners() const { return listeners_.size(); }

  struct Core;  // shared with the CAF actor, in engine_bridge.cpp
  // Called on the I/O thread by the actor's handlers.
  void dispatch(ChannelBatch&);
  void fail_all(const std::string& why);

 private:
  struct Entry {
    Listener* listener = nullptr;
    std::uint64_t dispatch = 0;  // the dispatch that last gave this id a slot
    std::size_t slot = 0;        // its batch in scratch_ during that dispatch
  };
  std::unordered_map<scheduler::RequestId, Entry> listeners_;
  std::shared_ptr<Core> core_;
  std::uint64_t dispatches_ = 0;
  // Per dispatch: the requests touched, with their batches (reused between steps).
  struct Slot {
    scheduler::RequestId id = 0;
    Listener* listener = nullptr;
    ChannelBatch batch;
  };
  std::vector<Slot> scratch_;
  // Whether `listener` still listens to `id` (it may have left during an earlier delivery).
  bool listens(scheduler::RequestId id, const Listener* listener) const;
};

}  // namespace actorlm::http
