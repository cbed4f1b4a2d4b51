// json.hpp - a small streaming JSON writer for the CLI's --json output: correct string
// escaping (invalid UTF-8 becomes U+FFFD, so the document is always valid JSON), two-space
// indentation, commas and nesting tracked here rather than by every caller.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cli {

class JsonWriter {
public:
    explicit JsonWriter(std::FILE *out) : out_(out) {}
    JsonWriter &begin_object();
    JsonWriter &end_object();
    JsonWriter &begin_array();
    JsonWriter &end_array();
    JsonWriter &key(const std::string &k);
    JsonWriter &value(const std::string &s) { return value(s.data(), s.size()); }
    JsonWriter &value(const char *s, size_t n);
    JsonWriter &value(const char *s);
    JsonWriter &value(uint64_t v);
    JsonWriter &value(int64_t v);
    JsonWriter &value(int v) { return value(static_cast<int64_t>(v)); }
    JsonWriter &value(unsigned v) { return value(static_cast<uint64_t>(v)); }
    JsonWriter &value(double v);  // non-finite numbers are written as null
    JsonWriter &value(bool v);
    JsonWriter &null();
    // Ends the document with a newline; the writer must be back at the top level.
    void finish();

    // The JSON string literal for (s, n), quotes included.
    static std::string quote(const char *s, size_t n);

private:
    std::FILE *out_;
    struct Level {
        bool array;
        size_t count;
    };
    std::vector<Level> stack_;
    bool after_key_ = false;
    void before_value();
    void newline();
};

}  // namespace cli
