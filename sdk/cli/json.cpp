#include "json.hpp"

#include <cinttypes>
#include <cmath>
#include <stdexcept>

namespace cli {

namespace {

// Length of the well-formed UTF-8 sequence at s[0..n), or 0 when it is not one (overlongs,
// surrogates and code points past U+10FFFF included).
size_t utf8_sequence(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
        len = 2;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; ++i) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

}  // namespace

std::string JsonWriter::quote(const char *s, size_t n) {
    std::string r;
    r.reserve(n + 2);
    r += '"';
    const auto *u = reinterpret_cast<const unsigned char *>(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            r += '\\';
            r += static_cast<char>(c);
            ++i;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': r += "\\n"; break;
            case '\r': r += "\\r"; break;
            case '\t': r += "\\t"; break;
            case '\b': r += "\\b"; break;
            case '\f': r += "\\f"; break;
            default: {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                r += buf;
            }
            }
            ++i;
        } else if (c < 0x80) {
            r += static_cast<char>(c);
            ++i;
        } else {
            size_t len = utf8_sequence(u + i, n - i);
            if (len == 0) {
                r += "\\ufffd";
                ++i;
            } else {
                r.append(s + i, len);
                i += len;
            }
        }
    }
    r += '"';
    return r;
}

void JsonWriter::newline() {
    std::fputc('\n', out_);
    for (size_t i = 0; i < stack_.size(); ++i) std::fputs("  ", out_);
}

void JsonWriter::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (stack_.empty()) return;
    if (!stack_.back().array) throw std::logic_error("JSON value in an object without a key");
    if (stack_.back().count++) std::fputc(',', out_);
    newline();
}

JsonWriter &JsonWriter::key(const std::string &k) {
    if (stack_.empty() || stack_.back().array || after_key_) throw std::logic_error("JSON key outside an object");
    if (stack_.back().count++) std::fputc(',', out_);
    newline();
    std::string q = quote(k.data(), k.size());
    std::fwrite(q.data(), 1, q.size(), out_);
    std::fputs(": ", out_);
    after_key_ = true;
    return *this;
}

JsonWriter &JsonWriter::begin_object() {
    before_value();
    std::fputc('{', out_);
    stack_.push_back({false, 0});
    return *this;
}

JsonWriter &JsonWriter::begin_array() {
    before_value();
    std::fputc('[', out_);
    stack_.push_back({true, 0});
    return *this;
}

JsonWriter &JsonWriter::end_object() {
    if (stack_.empty() || stack_.back().array || after_key_) throw std::logic_error("unbalanced JSON object");
    bool empty = stack_.back().count == 0;
    stack_.pop_back();
    if (!empty) newline();
    std::fputc('}', out_);
    return *this;
}

JsonWriter &JsonWriter::end_array() {
    if (stack_.empty() || !stack_.back().array) throw std::logic_error("unbalanced JSON array");
    bool empty = stack_.back().count == 0;
    stack_.pop_back();
    if (!empty) newline();
    std::fputc(']', out_);
    return *this;
}

JsonWriter &JsonWriter::value(const char *s, size_t n) {
    before_value();
    std::string q = quote(s, n);
    std::fwrite(q.data(), 1, q.size(), out_);
    return *this;
}

JsonWriter &JsonWriter::value(const char *s) { return value(s, std::char_traits<char>::length(s)); }

JsonWriter &JsonWriter::value(uint64_t v) {
    before_value();
    std::fprintf(out_, "%" PRIu64, v);
    return *this;
}

JsonWriter &JsonWriter::value(int64_t v) {
    before_value();
    std::fprintf(out_, "%" PRId64, v);
    return *this;
}

JsonWriter &JsonWriter::value(double v) {
    if (!std::isfinite(v)) return null();
    before_value();
    std::fprintf(out_, "%.12g", v);
    return *this;
}

JsonWriter &JsonWriter::value(bool v) {
    before_value();
    std::fputs(v ? "true" : "false", out_);
    return *this;
}

JsonWriter &JsonWriter::null() {
    before_value();
    std::fputs("null", out_);
    return *this;
}

void JsonWriter::finish() {
    if (!stack_.empty() || after_key_) throw std::logic_error("unfinished JSON document");
    std::fputc('\n', out_);
    std::fflush(out_);
}

}  // namespace cli
