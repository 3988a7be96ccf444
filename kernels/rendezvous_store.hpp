#pragma once
// Where the ranks of one data-plane group (Gloo on cpu, NCCL's unique id on cuda) exchange the
// few bytes they need to find each other: a key-value store that every rank of the group can
// reach. In one process it can be a map; across processes the head serves one over its actors
// (actors/cluster/rendezvous_store_actor.hpp).
//
// Contract: set() publishes a value under a key (each key is set once per group); get() returns
// the value, waiting up to `timeout` for a key not set yet, and throws std::runtime_error naming
// the key when it is still missing then (or when the store is gone). Thread-safe.

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace actorlm::kernels {

class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  virtual std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

// Another store's keys under a prefix, so that several groups (a layer split's tensor-parallel
// stages) meet through one store without their keys colliding.
class PrefixedStore : public RendezvousStore {
 public:
  PrefixedStore(std::shared_ptr<RendezvousStore> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& value) override { inner_->set(prefix_ + key, value); }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_->get(prefix_ + key, timeout);
  }

 private:
  std::shared_ptr<RendezvousStore> inner_;
  std::string prefix_;
};

// A store in this process's memory: for ranks of the kind that spans processes met by threads of
// one process (tests and benchmarks of the cross-process data plane).
class MemoryStore : public RendezvousStore {
 public:
  void set(const std::string& key, const std::vector<char>& value) override {
    {
      std::lock_guard lock(mutex_);
      values_[key] = value;
    }
    set_.notify_all();
  }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (!set_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
      throw std::runtime_error("rendezvous store: key '" + key + "' not set within " +
                               std::to_string(timeout.count()) + " ms");
    return values_.at(key);
  }

 private:
  std::mutex mutex_;
  std::condition_variable set_;
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace actorlm::kernels
