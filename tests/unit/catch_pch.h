// What build/san/pch/catch2/catch.hpp.gch is made from (Makefile, CATCH_PCH):
// Catch2 included, so that it stays a system header.
#include <catch2/catch.hpp>
