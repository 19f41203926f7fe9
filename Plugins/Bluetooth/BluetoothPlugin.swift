// The BlueZ plugin: bluetooth (not written yet).
