"""Learning that changes behaviour (issue 16): predict-then-compare, Reflexion, credit assignment and the
ExpeL curator. Pure functions over models; the activities do the I/O."""
