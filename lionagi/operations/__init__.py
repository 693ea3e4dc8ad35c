"""Operations: the turn driver and the operation bodies that run inside turns."""
