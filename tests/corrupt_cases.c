#include "craft.h"
