package host_test

func runEstate() int { return 2 }
