"""What the driver tells about itself: the record of every call."""
