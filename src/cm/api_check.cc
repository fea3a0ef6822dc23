// Compiles the public headers on their own (each must be self-contained).
#include "cm/rdma_cm.h"
#include "cm/types.h"
