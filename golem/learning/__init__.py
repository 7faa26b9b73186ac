"""Learning that changes behaviour: predict-then-compare, Reflexion, credit assignment and the
ExpeL curator. Pure functions over models; the activities do the I/O."""
