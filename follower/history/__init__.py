"""The read model a person sees (`talk show`): timeline, transcript, read marks, receive log."""
