#include "core/store/store_service.h"

#include "core/base/buggify.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/base/printable.h"
#include "core/store/value_delta.h"

namespace dagsim::store {

const char* store_op_name(StoreOp op) {
  switch (op) {
    case StoreOp::set: return "set";
    case StoreOp::get: return "get";
    case StoreOp::compare_set: return "compare_set";
    case StoreOp::add: return "add";
    case StoreOp::wait: return "wait";
    case StoreOp::check: return "check";
    case StoreOp::delete_key: return "delete_key";
    case StoreOp::num_keys: return "num_keys";
    case StoreOp::multi_get: return "multi_get";
    case StoreOp::multi_set: return "multi_set";
    case StoreOp::get_versioned: return "get_versioned";
    case StoreOp::compare_set_version: return "compare_set_version";
    case StoreOp::watch: return "watch";
  }
  return "?";
}

std::string key_list(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size() && i < 8; ++i) out += (i > 0 ? ", " : "") + printable(keys[i], 80);
  if (keys.size() > 8) out += ", and " + std::to_string(keys.size() - 8) + " more";
  return out + "]";
}

StoreService::StoreService(rpc::RpcAgent& agent)
    : agent_(agent), table_(uint64_t{static_cast<uint16_t>(agent.env().incarnation)} << kIncarnationShift) {
  agent_.add_handler(kStoreRequest, [this](WorkerId, const rpc::Bytes& payload) {
    return serve(rpc::from_bytes<StoreRequest>(payload));
  });
}

void StoreService::set_write_observer(WriteObserver observer) {
  if (observer_id_ != 0) table_.unobserve(observer_id_);
  observer_id_ = 0;
  if (!observer) return;
  // The table tells its observers on the writer's fiber before it yields, so before any waiter
  // it woke runs.
  observer_id_ = table_.observe([observer = std::move(observer)](const KeyChange& c) {
    observer(c.key, c.after ? Versioned{*c.after, c.version} : Versioned{});
  });
}

runtime::TimePoint StoreService::deadline(const StoreRequest& request, const std::string& what) const {
  if (request.timeout_ns < 0) throw errors::invalid_argument("store " + what + ": negative timeout");
  return agent_.env().clock.now() + Duration{request.timeout_ns};
}

std::shared_ptr<const rpc::Bytes> StoreService::delta(const std::string& key, uint64_t base, uint64_t version,
                                                       const Bytes& now) {
  if (base == 0 || now.size() < kMinDeltaBytes) return nullptr;
  for (const MadeDelta& m : made_) {
    if (m.base == base && m.version == version && m.key == key) return m.delta;
  }
  const Bytes* held = table_.value_at(key, base);
  if (held == nullptr) {
    DAGSIM_PROBE("store.delta_base_no_longer_held");
    return nullptr;
  }
  // Read back: a base the table still holds is a version of this key, never newer than the one
  // answered, which is the key's current version.
  DAGSIM_ASSERT(base <= version);
  DAGSIM_ASSERT_EQ(version, table_.version_of(key));
  ++deltas_made_;
  std::shared_ptr<const rpc::Bytes> made;
  if (std::optional<rpc::Bytes> d = make_delta(*held, now, now.size() / 2)) {
    made = std::make_shared<const rpc::Bytes>(std::move(*d));
  } else {
    DAGSIM_PROBE("store.delta_fell_back_to_full_value");
  }
  made_[next_made_] = MadeDelta{key, base, version, made};
  next_made_ = (next_made_ + 1) % made_.size();
  return made;
}

rpc::Bytes StoreService::serve(const StoreRequest& request) {
  if (request.op == 0 || request.op > kLastStoreOp) {
    throw errors::invalid_argument("store: unknown operation " + std::to_string(request.op));
  }
  const auto op = static_cast<StoreOp>(request.op);
  const std::vector<std::string>& keys = request.keys;
  auto need = [&](size_t n_keys, size_t n_values) {
    if (keys.size() != n_keys || request.values.size() != n_values) {
      throw errors::invalid_argument(std::string("store ") + store_op_name(op) + ": expected " + std::to_string(n_keys) +
                                     " key(s) and " + std::to_string(n_values) + " value(s)");
    }
  };
  auto at_least_one_key = [&] {
    throw errors::invalid_argument(std::string("store ") + store_op_name(op) + ": expected at least one key and no values");
  };
  auto timed_out_after = [&](const std::string& what) {
    return errors::timed_out("store " + what + " timed out after " + std::to_string(request.timeout_ns / 1'000'000) + " ms");
  };
  StoreReply reply;
  // The versioned operations answer with the key's value now (or the delta to it from the
  // request's base) and its version; an absent key with an empty value and version 0.
  auto answer_with_current = [&](const std::string& key) {
    const uint64_t version = table_.version_of(key);
    DAGSIM_ASSERT(version <= table_.revision());
    reply.versions.push_back(version);
    const Bytes* value = table_.value_at(key, version);
    if (value == nullptr) {
      reply.values.emplace_back();
    } else if (std::shared_ptr<const rpc::Bytes> d = delta(key, request.base, version, *value)) {
      ++deltas_sent_;
      reply.values.push_back(*d);
      reply.delta_base = request.base;
    } else {
      reply.values.push_back(*value);
    }
  };
  switch (op) {
    case StoreOp::set:
      need(1, 1);
      table_.set(keys[0], request.values[0]);
      break;
    case StoreOp::get:
    case StoreOp::multi_get:
    case StoreOp::wait: {
      if (op == StoreOp::get) need(1, 0);
      if (keys.empty() || !request.values.empty()) at_least_one_key();
      if (!table_.check(keys)) {
        const std::string what = std::string(store_op_name(op)) + " for keys " + key_list(keys);
        agent_.park_request();  // what ends this wait is another request: let it in (rpc_agent.h)
        if (!table_.wait_for_keys(keys, deadline(request, what))) {
          throw errors::timed_out(timed_out_after(what).detail() + "; still missing: " + key_list(table_.missing(keys)));
        }
      }
      if (op != StoreOp::wait) {
        for (const std::string& k : keys) reply.values.push_back(*table_.get(k));
      }
      break;
    }
    case StoreOp::compare_set:
      need(1, 2);
      reply.values.push_back(table_.compare_set(keys[0], request.values[0], request.values[1]));
      break;
    case StoreOp::add:
      need(1, 0);
      // A slow store: the add lands, and its answer is late (within every caller's timeout).
      if (DAGSIM_BUGGIFY("store.reply_delayed")) agent_.env().clock.sleep(std::chrono::milliseconds(20));
      reply.number = table_.add(keys[0], request.number);
      break;
    case StoreOp::check:
      if (keys.empty() || !request.values.empty()) at_least_one_key();
      reply.flag = table_.check(keys);
      break;
    case StoreOp::delete_key:
      need(1, 0);
      reply.flag = table_.erase(keys[0]);
      break;
    case StoreOp::num_keys:
      need(0, 0);
      reply.number = static_cast<int64_t>(table_.size());
      break;
    case StoreOp::multi_set:
      if (keys.empty() || keys.size() != request.values.size()) {
        throw errors::invalid_argument("store multi_set: expected as many values as keys, at least one");
      }
      table_.multi_set(keys, request.values);
      break;
    case StoreOp::get_versioned:
      need(1, 0);
      answer_with_current(keys[0]);
      break;
    case StoreOp::compare_set_version: {
      need(1, 1);
      // A write answers its new version only: the value is the client's own. A value sent as a
      // delta against the expected version is rebuilt only when that version is still current:
      // otherwise nothing is written and it is not needed.
      if (request.value_base != 0 && request.value_base != request.version) {
        throw errors::invalid_argument("store compare_set_version: a value sent as a delta against version " +
                                       std::to_string(request.value_base) + ", not the expected " +
                                       std::to_string(request.version));
      }
      std::optional<uint64_t> written;
      if (request.value_base == 0) {
        written = table_.compare_set_version(keys[0], request.version, request.values[0]);
      } else if (const Bytes* held = table_.value_at(keys[0], request.version); held != nullptr &&
                                                                                table_.version_of(keys[0]) == request.version) {
        ++deltas_received_;
        written = table_.compare_set_version(keys[0], request.version,
                                             apply_delta(*held, request.values[0], kMaxValueBytes));
      } else {
        DAGSIM_PROBE("store.cas_delta_against_stale_version");
      }
      if (written) {
        // The token the write went against is behind it: the version answered is newer.
        DAGSIM_ASSERT(*written > request.version);
        reply.flag = true;
        reply.versions.push_back(*written);
      } else {
        answer_with_current(keys[0]);
      }
      break;
    }
    case StoreOp::watch: {
      need(1, 0);
      const std::string what = "watch of key " + printable(keys[0], 80);
      // A quiet watch answers the unchanged key at its timeout (Store::watch_at_most).
      agent_.park_request();  // what ends this wait is another request: let it in (rpc_agent.h)
      if (!table_.wait_for_change(keys[0], request.version, deadline(request, what)) && request.number != kWatchQuietly) {
        throw timed_out_after(what);
      }
      // The answer leaves late, past the watch's own deadline but inside the client's grace
      // (store_client.h's kReplyGrace, 1 s): a slow store or link, which a client of watch_at_most must tolerate.
      if (DAGSIM_BUGGIFY("store.watch_reply_late")) agent_.env().clock.sleep(std::chrono::milliseconds(500));
      answer_with_current(keys[0]);
      break;
    }
  }
  return rpc::to_bytes(reply);
}

}  // namespace dagsim::store
