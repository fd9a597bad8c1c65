// Text in messages: tinyfuse's messages are always valid UTF-8 (Python turns them into str, and a
// byte sequence cut inside a character would raise UnicodeDecodeError instead of the error), and
// text quoted from the caller's input is cut short at a character boundary.
#pragma once

#include <cstddef>
#include <string>

namespace tinyfuse {

// `text` with every byte that is not part of a well-formed UTF-8 character written as "\xNN".
// Valid UTF-8 comes back unchanged.
std::string valid_utf8(const std::string& text);

// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a UTF-8
// character.
std::string utf8_prefix(const std::string& text, size_t max_bytes);

// `text` itself when it has at most `max_bytes` bytes, else a prefix cut at a character boundary
// followed by "..." (max_bytes in all).
std::string shorten(const std::string& text, size_t max_bytes);

}  // namespace tinyfuse
