#pragma once
// Test-only: lets BOOST_TEST print DType and std::optional<T> (and vectors inside), so failed
// comparisons show both sides.

#include "model/format/tensor_source.hpp"

#include <boost/test/tools/detail/print_helper.hpp>

#include <optional>
#include <ostream>
#include <ranges>
#include <string>
#include <type_traits>

namespace boost::test_tools::tt_detail {

template <class T>
struct print_log_value<std::optional<T>> {
  void operator()(std::ostream& os, const std::optional<T>& v) {
    if (!v) {
      os << "nullopt";
    } else if constexpr (std::ranges::range<T> && !std::is_same_v<T, std::string>) {
      os << "{";
      for (const auto& x : *v) os << " " << x;
      os << " }";
    } else {
      os << *v;
    }
  }
};

}  // namespace boost::test_tools::tt_detail

namespace actorlm::model {
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }
}  // namespace actorlm::model
