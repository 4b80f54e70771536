"""The host: paths the CO hands us, bind mounts, and volume backing files."""
