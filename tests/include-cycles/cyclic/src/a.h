// A tree with an include cycle, which include-cycles.py must report (test include-cycles-found).
#pragma once
#include "b.h"
