/// tapewise/tapewise.hpp — the whole public C++ API in one include.
/// \file
#pragma once

#include "requires_cpp20.hpp"
#include "backend.hpp"
#include "core.hpp"
#include "op.hpp"
#include "tape.hpp"
