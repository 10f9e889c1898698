"""What the machine is and how it is set: recorded next to every result."""
