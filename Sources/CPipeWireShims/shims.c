#include "cpipewire-shims.h"
