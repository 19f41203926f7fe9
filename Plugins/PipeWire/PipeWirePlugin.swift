// The PipeWire plugin: camera and microphone (not written yet).
