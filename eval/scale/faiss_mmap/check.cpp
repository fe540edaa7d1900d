// Does faiss (the 1.12 faiss-sys builds) search a memory-mapped IndexHNSWFlat (IO_FLAG_MMAP_IFC) as
// it searches one read into memory, with efSearch given per search? Prints, for each read mode,
// whether the links are a view of the file and a digest of the top 10 of 200 queries at
// efSearch 1 and 300 (eval/scale/faiss_mmap/check.sh builds and runs it).
#include <faiss/IndexHNSW.h>
#include <faiss/IndexFlat.h>
#include <faiss/index_io.h>
#include <random>
#include <cstdio>
#include <vector>
#include <cstring>
int main(int argc,char**argv){
  int d=16,n=3000; std::mt19937 rng(1); std::normal_distribution<float> g;
  std::vector<float> x(n*d); for(auto&v:x) v=g(rng);
  faiss::IndexHNSWFlat idx(d,8); idx.add(n,x.data());
  faiss::write_index(&idx,argv[1]);
  for(int flags: {0, faiss::IO_FLAG_MMAP_IFC}){
    faiss::Index* r=faiss::read_index(argv[1],flags);
    auto* h=dynamic_cast<faiss::IndexHNSW*>(r);
    printf("flags %d hnsw %p storage %p flat %p efSearch %d ntotal %ld nb %zu owned %d\n",flags,(void*)h,(void*)h->storage,(void*)dynamic_cast<faiss::IndexFlat*>(h->storage),h->hnsw.efSearch,(long)r->ntotal,h->hnsw.neighbors.size(), (int)h->hnsw.neighbors.is_owned);
    for(int ef: {1,300}){
      faiss::SearchParametersHNSW p; p.efSearch=ef;
      std::vector<float> D(10*200); std::vector<faiss::idx_t> L(10*200);
      h->search(200,x.data(),10,D.data(),L.data(),&p);
      long s=0; for(auto l:L) s=s*31+l; printf(" ef %d hash %ld first %ld %ld %ld\n",ef,s,(long)L[0],(long)L[1],(long)L[2]);
    }
  }
}
