#pragma once
#define CELL_VERSION "0.1.0"
