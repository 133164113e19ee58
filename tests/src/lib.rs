//! Integration tests against real mariadbd live in tests/*.rs.
