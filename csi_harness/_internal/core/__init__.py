"""The base layer: waiting, tool lookup, processes, images and the files the harness ships."""
