/* PipeWire macros Swift cannot import, as functions (filled in with the PipeWire plugin). */
#ifndef CPIPEWIRE_SHIMS_H
#define CPIPEWIRE_SHIMS_H
#include <pipewire/pipewire.h>
#endif
