#include <pipewire/pipewire.h>
#include <spa/utils/dict.h>
