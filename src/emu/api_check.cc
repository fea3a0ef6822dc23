// Compiles the public headers on their own (each must be self-contained).
#include "emu/device.h"
#include "emu/gsi.h"
#include "emu/objects.h"
#include "emu/records.h"
#include "emu/verbs_attrs.h"
#include "emu/verbs_types.h"
