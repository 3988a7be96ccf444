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
#include <memory>
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

}  // namespace actorlm::kernels
