// PyTorch 1.13's tests of RendezvousParameters (rendezvous/api_test.py) and of the rendezvous
// string parsers (rendezvous/utils_test.py), ported by name: each test says which it is. Python's
// int and bool values have no counterpart here (options are text); the text cases are ported.
#include "core/rendezvous/rendezvous_parameters.h"

#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"

namespace dagsim::rendezvous {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

RendezvousParameters params(int64_t min_nodes = 1, int64_t max_nodes = 1, std::map<std::string, std::string> config = {}) {
  return RendezvousParameters("dummy_backend", "dummy_endpoint", "dummy_run_id", min_nodes, max_nodes,
                              std::move(config));
}

// test_init_initializes_params, _if_min_nodes_equals_to_1, _if_min_and_max_nodes_are_equal
TEST(RendezvousParametersTest, InitInitializesParams) {
  for (const auto& [min, max] : std::vector<std::pair<int64_t, int64_t>>{{2, 3}, {1, 3}, {3, 3}}) {
    const RendezvousParameters p("dummy_backend", "dummy_endpoint", "dummy_run_id", min, max,
                                 {{"dummy_param", "x"}});
    EXPECT_EQ(p.backend(), "dummy_backend");
    EXPECT_EQ(p.endpoint(), "dummy_endpoint");
    EXPECT_EQ(p.run_id(), "dummy_run_id");
    EXPECT_EQ(p.min_nodes(), min);
    EXPECT_EQ(p.max_nodes(), max);
    EXPECT_EQ(p.get("dummy_param"), "x");
  }
}

// test_init_raises_error_if_backend_is_none_or_empty
TEST(RendezvousParametersTest, InitRaisesErrorIfBackendIsEmpty) {
  EXPECT_TRUE(throws_error([] { RendezvousParameters("", "e", "r", 1, 1); }, ErrorCode::invalid_argument,
                           {"The rendezvous backend name must be a non-empty string."}));
}

// test_init_raises_error_if_min_nodes_is_less_than_1
TEST(RendezvousParametersTest, InitRaisesErrorIfMinNodesIsLessThan1) {
  for (int64_t min : {0, -1, -5}) {
    EXPECT_TRUE(throws_error([&] { params(min, 1); }, ErrorCode::invalid_argument,
                             {"The minimum number of rendezvous nodes (" + std::to_string(min) +
                              ") must be greater than zero."}));
  }
}

// test_init_raises_error_if_max_nodes_is_less_than_min_nodes
TEST(RendezvousParametersTest, InitRaisesErrorIfMaxNodesIsLessThanMinNodes) {
  EXPECT_TRUE(throws_error([] { params(3, 2); }, ErrorCode::invalid_argument,
                           {"The maximum number of rendezvous nodes (2) must be greater than or equal to the "
                            "minimum number of rendezvous nodes (3)."}));
}

// test_get_returns_none_if_key_does_not_exist, test_get_returns_default_if_key_does_not_exist
TEST(RendezvousParametersTest, GetReturnsNoneOrTheDefaultIfKeyDoesNotExist) {
  const RendezvousParameters p = params(1, 1, {{"dummy_param", "x"}});
  EXPECT_EQ(p.get("dummy_param2"), std::nullopt);
  EXPECT_EQ(p.get("dummy_param2", "default"), "default");
  EXPECT_EQ(p.get("dummy_param", "default"), "x");
}

// test_get_as_bool_returns_none_if_key_does_not_exist, ..._returns_default_if_key_does_not_exist
TEST(RendezvousParametersTest, GetAsBoolReturnsNoneOrTheDefaultIfKeyDoesNotExist) {
  const RendezvousParameters p = params();
  EXPECT_EQ(p.get_as_bool("dummy_param"), std::nullopt);
  EXPECT_TRUE(p.get_as_bool("dummy_param", true));
  EXPECT_FALSE(p.get_as_bool("dummy_param", false));
}

// test_get_as_bool_returns_true_if_value_represents_true
TEST(RendezvousParametersTest, GetAsBoolReturnsTrueIfValueRepresentsTrue) {
  for (const char* v : {"1", "True", "tRuE", "T", "t", "yEs", "Y", "y"}) {
    EXPECT_EQ(params(1, 1, {{"dummy_param", v}}).get_as_bool("dummy_param"), true) << v;
  }
}

// test_get_as_bool_returns_false_if_value_represents_false
TEST(RendezvousParametersTest, GetAsBoolReturnsFalseIfValueRepresentsFalse) {
  for (const char* v : {"0", "False", "fAlSe", "F", "f", "nO", "N", "n"}) {
    EXPECT_EQ(params(1, 1, {{"dummy_param", v}}).get_as_bool("dummy_param", true), false) << v;
  }
}

// test_get_as_bool_raises_error_if_value_is_invalid
TEST(RendezvousParametersTest, GetAsBoolRaisesErrorIfValueIsInvalid) {
  for (const char* v : {"01", "Flse", "Ture", "g", "4", "_", "truefalse", "", " true"}) {
    const RendezvousParameters p = params(1, 1, {{"dummy_param", v}});
    EXPECT_TRUE(throws_error([&] { p.get_as_bool("dummy_param"); }, ErrorCode::invalid_argument,
                             {"The rendezvous configuration option 'dummy_param' does not represent a valid "
                              "boolean value."}))
        << v;
  }
}

// test_get_as_int_returns_none_if_key_does_not_exist, ..._returns_default_if_key_does_not_exist
TEST(RendezvousParametersTest, GetAsIntReturnsNoneOrTheDefaultIfKeyDoesNotExist) {
  const RendezvousParameters p = params();
  EXPECT_EQ(p.get_as_int("dummy_param"), std::nullopt);
  EXPECT_EQ(p.get_as_int("dummy_param", 5), 5);
}

// test_get_as_int_returns_integer_if_value_represents_integer (Python's int(): spaces around, a
// sign, '_' between digits; int64's whole range)
TEST(RendezvousParametersTest, GetAsIntReturnsIntegerIfValueRepresentsInteger) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"0", 0},       {"-10", -10},  {"5", 5},        {"  4", 4},     {"4  ", 4}, {" 4 ", 4},
      {"+7", 7},      {"1_000", 1000}, {"007", 7},
      {"9223372036854775807", INT64_MAX}, {"-9223372036854775808", INT64_MIN}};
  for (const auto& [text, value] : cases) {
    EXPECT_EQ(params(1, 1, {{"dummy_param", text}}).get_as_int("dummy_param"), value) << text;
  }
}

// test_get_as_int_raises_error_if_value_is_invalid (and what int64 cannot hold)
TEST(RendezvousParametersTest, GetAsIntRaisesErrorIfValueIsInvalid) {
  for (const char* v : {"a", "0.2", " 1 2", "2a", "", "-", "1__0", "_1", "1_", "0x10",
                        "9223372036854775808", "-9223372036854775809"}) {
    const RendezvousParameters p = params(1, 1, {{"dummy_param", v}});
    EXPECT_TRUE(throws_error([&] { p.get_as_int("dummy_param"); }, ErrorCode::invalid_argument,
                             {"The rendezvous configuration option 'dummy_param' does not represent a valid "
                              "integer value."}))
        << v;
  }
}

// UtilsTest.test_parse_rendezvous_config_returns_dict
TEST(UtilsTest, ParseRendezvousConfigReturnsDict) {
  const std::map<std::string, std::string> expected = {
      {"a", "dummy_value_1"}, {"b", "dummy_value_2"}, {"c", "dummy_value_3=1"}, {"d", "dummy_value_4/1"},
      {"e", "dummy_value_5"}};
  EXPECT_EQ(parse_rendezvous_config(" b= dummy_value_2,c=dummy_value_3=1, d=dummy_value_4/1 ,a  =dummy_value_1, "
                                    "e=dummy_value_5 "),
            expected);
}

// UtilsTest.test_parse_rendezvous_returns_empty_dict_if_str_is_empty
TEST(UtilsTest, ParseRendezvousReturnsEmptyDictIfStrIsEmpty) {
  for (const char* text : {"", " ", "\t\n"}) EXPECT_TRUE(parse_rendezvous_config(text).empty());
}

// UtilsTest.test_parse_rendezvous_raises_error_if_str_is_invalid
TEST(UtilsTest, ParseRendezvousRaisesErrorIfStrIsInvalid) {
  for (const char* text : {",", "=,", ",,", "a=b,,", "=b", " =b", ",a=b", "a=b,=c"}) {
    EXPECT_TRUE(throws_error([&] { parse_rendezvous_config(text); }, ErrorCode::invalid_argument,
                             {"The rendezvous configuration string must be in format "
                              "<key1>=<value1>,...,<keyN>=<valueN>."}))
        << text;
  }
}

// UtilsTest.test_parse_rendezvous_raises_error_if_value_is_empty
TEST(UtilsTest, ParseRendezvousRaisesErrorIfValueIsEmpty) {
  for (const char* text : {"a=", "a= ", "a", "a=b,c", "a=b,c="}) {
    const std::string key = std::string(text).size() > 3 ? "c" : "a";
    EXPECT_TRUE(throws_error([&] { parse_rendezvous_config(text); }, ErrorCode::invalid_argument,
                             {"The rendezvous configuration option '" + key + "' must have a value specified."}))
        << text;
  }
}

// UtilsTest.test_try_parse_port_returns_port, ..._returns_none_if_str_is_invalid
TEST(UtilsTest, TryParsePort) {
  EXPECT_EQ(try_parse_port("123"), 123u);
  EXPECT_EQ(try_parse_port("99999"), 99999u);  // the range is the caller's to check
  for (const char* text : {"", "  ", "  1", "1  ", " 1 ", "abc", "123456", "-1", "+1"}) {
    EXPECT_EQ(try_parse_port(text), std::nullopt) << text;
  }
}

// UtilsTest.test_parse_rendezvous_endpoint_returns_tuple
TEST(UtilsTest, ParseRendezvousEndpointReturnsTuple) {
  for (const std::string host : {"dummy.com", "dummy-1.com", "dummy_1.com", "10.1.1.1", "::1", "[::1]"}) {
    const std::string bare = host.front() == '[' ? "::1" : host;
    for (uint32_t port : {0u, 123u, 65535u}) {
      EXPECT_EQ(parse_rendezvous_endpoint(" " + host + ":" + std::to_string(port) + " ", 123),
                (RendezvousEndpoint{bare, static_cast<uint16_t>(port)}))
          << host << " " << port;
    }
  }
}

// UtilsTest.test_parse_rendezvous_endpoint_returns_tuple_if_endpoint_has_no_port
TEST(UtilsTest, ParseRendezvousEndpointReturnsTupleIfEndpointHasNoPort) {
  EXPECT_EQ(parse_rendezvous_endpoint("dummy.com", 123), (RendezvousEndpoint{"dummy.com", 123}));
  EXPECT_EQ(parse_rendezvous_endpoint("10.1.1.1", 123), (RendezvousEndpoint{"10.1.1.1", 123}));
  EXPECT_EQ(parse_rendezvous_endpoint("[::1]", 123), (RendezvousEndpoint{"::1", 123}));
}

// UtilsTest.test_parse_rendezvous_endpoint_returns_tuple_if_endpoint_is_empty
TEST(UtilsTest, ParseRendezvousEndpointReturnsTupleIfEndpointIsEmpty) {
  for (const char* text : {"", " ", "\t"}) {
    EXPECT_EQ(parse_rendezvous_endpoint(text, 123), (RendezvousEndpoint{"localhost", 123}));
  }
}

// UtilsTest.test_parse_rendezvous_endpoint_raises_error_if_hostname_is_invalid
TEST(UtilsTest, ParseRendezvousEndpointRaisesErrorIfHostnameIsInvalid) {
  for (const char* text : {"~", "dummy.com :123", "~:123", ":123", "dummy com", "dummy\x01"}) {
    EXPECT_TRUE(throws_error([&] { parse_rendezvous_endpoint(text, 123); }, ErrorCode::invalid_argument,
                             {"must be a dot-separated list of labels, an IPv4 address, or an IPv6 address."}))
        << text;
  }
}

// UtilsTest.test_parse_rendezvous_endpoint_raises_error_if_port_is_invalid, _is_too_big
TEST(UtilsTest, ParseRendezvousEndpointRaisesErrorIfPortIsInvalidOrTooBig) {
  for (const char* text : {"dummy.com:", "dummy.com:abc", "dummy.com:-123", "dummy.com:-", "dummy.com:65536",
                           "dummy.com:123456"}) {
    EXPECT_TRUE(throws_error([&] { parse_rendezvous_endpoint(text, 123); }, ErrorCode::invalid_argument,
                             {"The port number of the rendezvous endpoint '" + std::string(text) +
                              "' must be an integer between 0 and 65536."}))
        << text;
  }
}

// dynamic_rendezvous_test.py CreateHandlerTest.test_create_handler_returns_handler: the timeouts
// come from "50", "60", "70" seconds (the handler built from them is in
// net/rendezvous_registry_test.cc); dagsim also reads decimal seconds and its own options.
TEST(CreateHandlerTest, SettingsReadTheTimeoutsFromTheParameters) {
  const RendezvousSettings s = settings_from_parameters(
      params(2, 3, {{"join_timeout", "50"}, {"last_call_timeout", "60"}, {"close_timeout", "70"}}));
  EXPECT_EQ(s.run_id, "dummy_run_id");
  EXPECT_EQ(s.min_nodes, 2u);
  EXPECT_EQ(s.max_nodes, 3u);
  EXPECT_EQ(s.timeout.join, seconds(50));
  EXPECT_EQ(s.timeout.last_call, seconds(60));
  EXPECT_EQ(s.timeout.close, seconds(70));
  const RendezvousSettings d = settings_from_parameters(
      params(1, 1, {{"join_timeout", "2.5"}, {"heartbeat_timeout", "0.25"}, {"keep_alive_interval", "1"},
                    {"keep_alive_max_attempt", " 2 "}}));
  EXPECT_EQ(d.timeout.join, milliseconds(2500));
  EXPECT_EQ(d.timeout.heartbeat, milliseconds(250));
  EXPECT_EQ(d.expiry(), seconds(2));
}

// CreateHandlerTest.test_create_handler_returns_handler_if_timeout_is_not_specified
TEST(CreateHandlerTest, SettingsTakePyTorchsDefaultsIfTimeoutIsNotSpecified) {
  const RendezvousSettings s = settings_from_parameters(params());
  EXPECT_EQ(s.timeout.join, seconds(600));
  EXPECT_EQ(s.timeout.last_call, seconds(30));
  EXPECT_EQ(s.timeout.close, seconds(30));
}

// What RendezvousTimeout and get_as_int refuse, refused in their words.
TEST(CreateHandlerTest, SettingsRefuseTimeoutsThatAreNotPositiveOrNotNumbers) {
  EXPECT_TRUE(throws_error([] { settings_from_parameters(params(1, 1, {{"join_timeout", "0"}})); },
                           ErrorCode::invalid_argument, {"The join timeout (0s) must be positive."}));
  EXPECT_TRUE(throws_error([] { settings_from_parameters(params(1, 1, {{"close_timeout", "-1.5"}})); },
                           ErrorCode::invalid_argument, {"close timeout (-1500ms) must be positive"}));
  EXPECT_TRUE(throws_error([] { settings_from_parameters(params(1, 1, {{"last_call_timeout", "soon"}})); },
                           ErrorCode::invalid_argument, {"'last_call_timeout' does not represent a valid number"}));
  EXPECT_TRUE(throws_error([] { settings_from_parameters(params(1, 1, {{"join_timeout", "99999999999999"}})); },
                           ErrorCode::invalid_argument, {"'join_timeout'", "too long"}));
  EXPECT_TRUE(throws_error([] { settings_from_parameters(params(1, 1, {{"keep_alive_max_attempt", "0"}})); },
                           ErrorCode::invalid_argument, {"keep_alive_max_attempt", "1 to 1000"}));
  EXPECT_TRUE(throws_error([] { settings_from_parameters(params(1, 100000)); }, ErrorCode::invalid_argument,
                           {"(100000) must be at most 65536"}));
}

}  // namespace
}  // namespace dagsim::rendezvous
