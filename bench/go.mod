module github.com/redfence/redfence/bench

go 1.26.0

replace github.com/redfence/redfence => ../
