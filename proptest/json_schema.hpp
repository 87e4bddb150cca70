// proptest/json_schema.hpp — a small JSON Schema validator for the runner's report schemas
// (spec/schemas/): the keywords those schemas use (type, const, enum, properties, required,
// additionalProperties, items, anyOf, minimum, pattern, local $ref into $defs), and nothing else: a
// schema with any other keyword is refused, so that no constraint is silently skipped.
#pragma once

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tapewise::testing {

class JsonSchema {
 public:
  explicit JsonSchema(nlohmann::json schema) : root_(std::move(schema)) {}

  // What in `document` breaks the schema, one line each ("/rows/0/dtype: "f32" is not one of ..."),
  // or the schema's own fault; empty when it conforms.
  std::vector<std::string> errors(const nlohmann::json& document) const {
    std::vector<std::string> found;
    check(root_, document, "", found);
    return found;
  }

 private:
  using Json = nlohmann::json;

  static bool has_type(const Json& value, const std::string& type) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    if (type == "integer") return value.is_number_integer();
    if (type == "number") return value.is_number();
    if (type == "boolean") return value.is_boolean();
    if (type == "null") return value.is_null();
    return false;
  }

  const Json& resolve(const std::string& ref, const std::string& at, std::vector<std::string>& found) const {
    static const Json nothing = Json::object();
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0 || !root_.contains("$defs") || !root_["$defs"].contains(ref.substr(prefix.size()))) {
      found.push_back(at + ": the schema's $ref " + ref + " does not resolve");
      return nothing;
    }
    return root_["$defs"][ref.substr(prefix.size())];
  }

  void check(const Json& schema, const Json& value, const std::string& at, std::vector<std::string>& found) const {
    static const std::set<std::string> known = {"$schema", "$id", "title", "description", "$defs", "$ref",
                                                "type", "const", "enum", "properties", "required",
                                                "additionalProperties", "items", "anyOf", "minimum", "pattern"};
    for (const auto& [key, unused] : schema.items())
      if (!known.count(key)) found.push_back(at + ": the schema uses '" + key + "', which this validator does not check");
    if (schema.contains("$ref")) check(resolve(schema["$ref"], at, found), value, at, found);
    if (schema.contains("type")) {
      const Json types = schema["type"].is_array() ? schema["type"] : Json::array({schema["type"]});
      bool any = false;
      for (const Json& t : types) any = any || has_type(value, t.get<std::string>());
      if (!any) {
        found.push_back(at + ": " + value.dump().substr(0, 80) + " is not of type " + schema["type"].dump());
        return;
      }
    }
    if (schema.contains("const") && value != schema["const"])
      found.push_back(at + ": " + value.dump().substr(0, 80) + " is not " + schema["const"].dump());
    if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end())
      found.push_back(at + ": " + value.dump().substr(0, 80) + " is not one of " + schema["enum"].dump());
    if (schema.contains("minimum") && value.is_number() && value.get<double>() < schema["minimum"].get<double>())
      found.push_back(at + ": " + value.dump() + " is below the minimum " + schema["minimum"].dump());
    if (schema.contains("pattern") && value.is_string() &&
        !std::regex_search(value.get<std::string>(), std::regex(schema["pattern"].get<std::string>())))
      found.push_back(at + ": " + value.dump().substr(0, 80) + " does not match " + schema["pattern"].dump());
    if (schema.contains("anyOf")) {
      bool any = false;
      for (const Json& option : schema["anyOf"]) {
        std::vector<std::string> option_errors;
        check(option, value, at, option_errors);
        any = any || option_errors.empty();
      }
      if (!any) found.push_back(at + ": " + value.dump().substr(0, 80) + " matches none of anyOf");
    }
    if (value.is_object()) check_object(schema, value, at, found);
    if (value.is_array() && schema.contains("items"))
      for (std::size_t i = 0; i < value.size(); ++i) check(schema["items"], value[i], at + "/" + std::to_string(i), found);
  }

  void check_object(const Json& schema, const Json& value, const std::string& at, std::vector<std::string>& found) const {
    if (schema.contains("required"))
      for (const Json& key : schema["required"])
        if (!value.contains(key.get<std::string>())) found.push_back(at + ": '" + key.get<std::string>() + "' is missing");
    const Json properties = schema.value("properties", Json::object());
    for (const auto& [key, member] : value.items()) {
      if (properties.contains(key)) {
        check(properties[key], member, at + "/" + key, found);
      } else if (schema.contains("additionalProperties")) {
        const Json& extra = schema["additionalProperties"];
        if (extra.is_boolean()) {
          if (!extra.get<bool>()) found.push_back(at + ": '" + key + "' is not a property of the schema");
        } else {
          check(extra, member, at + "/" + key, found);
        }
      }
    }
  }

  Json root_;
};

}  // namespace tapewise::testing
